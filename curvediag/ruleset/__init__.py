"""Declarative rules: schema, loading, evaluation and rule tests."""
