"""Data generators for tests and for rule tests, kept apart from the diagnosis itself.

- :mod:`curvediag.testing.synth`: series from compact specs (``"3.0x10 nan"``, ``gen: decay``),
  which ``curvediag rules test`` uses to build the runs of a rule's test cases (so it ships with
  the package);
- :mod:`curvediag.testing.synth_files`: real-format files (Trainer state, TensorBoard events,
  CSV) written from such runs, for reader tests;
- :mod:`curvediag.testing.scenarios`: seeded synthetic runs with a labelled fault each, for the
  synthetic accuracy benchmark (which measures the code, not real-run accuracy).
"""
