"""The import graph of curvediag/ says how the program works: data flows down.

Every module belongs to a layer; a module may import its own layer and the layers below, never
one above, not even lazily inside a function, and no set of modules imports itself in a circle.
``curvediag/__init__.py`` is the top: it names the public API and registers the presenters the
data model calls (see ``curvediag/_hooks.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "curvediag"

#: (layer, module prefixes), lowest first. The longest matching prefix decides.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # data: what everything else passes around
    ("model", ("curvediag._version", "curvediag._hooks", "curvediag.errors", "curvediag.escape",
               "curvediag.model")),
    # reading logs into Runs (and the generators that write synthetic ones)
    ("ingest", ("curvediag.normalize", "curvediag.ingest", "curvediag.testing",
                "curvediag.testing.synth",
                "curvediag.testing.synth_files")),
    # numbers computed from a Run's series
    ("features", ("curvediag.features", "curvediag.testing.scenarios")),
    # rules: YAML -> conditions over features -> findings
    ("ruleset", ("curvediag.ruleset",)),
    # load -> features -> rules -> Diagnosis
    ("pipeline", ("curvediag.pipeline",)),
    # what uses a Diagnosis: reports, batch tables, live monitoring, notebook display
    ("app", ("curvediag.report", "curvediag.batch", "curvediag.live", "curvediag.watch",
             "curvediag.display", "curvediag.render", "curvediag.integrations",
             "curvediag.progress")),
    # command-line entry points
    ("cli", ("curvediag.cli",)),
    ("top", ("curvediag",)),
]  # fmt: skip


#: (importer prefix, imported prefix, why): pairs the layer order allows but the design does not.
FORBIDDEN: list[tuple[str, str, str]] = [
    ("curvediag.features", "curvediag.ingest",
     "features read series; they never know file formats"),
]  # fmt: skip


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    mods = {}
    for p in package.rglob("*.py"):
        parts = list(p.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _layer(module: str) -> int:
    best = max(
        (
            (len(prefix), i)
            for i, (_, prefixes) in enumerate(LAYERS)
            for prefix in prefixes
            if module == prefix or module.startswith(prefix + ".")
        ),
        default=None,
    )
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[1]


def _imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the curvediag modules it imports (anywhere in its body, lazily or not)."""
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges[m].update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = {f"{target}.{a.name}" for a in node.names} & mods.keys()
                edges[m].update(subs)
                if target in mods and len(subs) < len(node.names):
                    edges[m].add(target)  # a name defined in the module itself
            elif (  # importlib.import_module("curvediag.x")
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and node.args[0].value in mods
            ):
                edges[m].add(node.args[0].value)
        edges[m].discard(m)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


EDGES = _imports(_modules())


def test_every_module_has_a_layer() -> None:
    for m in EDGES:
        _layer(m)


def test_no_import_cycles() -> None:
    assert _cycles(EDGES) == []


def test_no_import_reaches_up_a_layer() -> None:
    names = [name for name, _ in LAYERS]
    bad = [
        f"{m} ({names[_layer(m)]}) imports {t} ({names[_layer(t)]})"
        for m, targets in sorted(EDGES.items())
        for t in sorted(targets)
        if _layer(t) > _layer(m)
    ]
    assert bad == []


def test_no_forbidden_import() -> None:
    bad = [
        f"{m} imports {t}: {why}"
        for m, targets in sorted(EDGES.items())
        for t in sorted(targets)
        for src, dst, why in FORBIDDEN
        if _under(m, src) and _under(t, dst)
    ]
    assert bad == []


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_the_checker_sees_lazy_relative_and_string_imports(tmp_path: Path) -> None:
    sources = {
        "curvediag/__init__.py": "",
        "curvediag/model.py": "def f():\n    from curvediag.report.markdown import x\n",
        "curvediag/ingest/__init__.py": "from . import csv\nfrom .csv import read\n",
        "curvediag/ingest/csv.py": "def read(): ...\n",
        "curvediag/features.py": (
            "import importlib\ndef g():\n    return importlib.import_module('curvediag.cli')\n"
        ),
        "curvediag/report/__init__.py": "",
        "curvediag/report/markdown.py": "from .. import model\nfrom ..ingest import read\n",
        "curvediag/cli.py": "",
    }
    for name, text in sources.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    edges = _imports(_modules(tmp_path / "curvediag"))
    assert edges["curvediag.model"] == {"curvediag.report.markdown"}  # lazy, inside a function
    assert edges["curvediag.features"] == {"curvediag.cli"}  # importlib with a string
    # `from . import csv` is an edge to the submodule, not to the package's __init__
    assert edges["curvediag.ingest"] == {"curvediag.ingest.csv"}
    # `from .. import model` names a submodule; `from ..ingest import read` a name of ingest
    assert edges["curvediag.report.markdown"] == {"curvediag.model", "curvediag.ingest"}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    with pytest.raises(AssertionError):
        _layer("elsewhere.module")
