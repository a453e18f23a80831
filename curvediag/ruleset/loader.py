"""Load and validate rule files: schema, unknown features, undeclared params, duplicate ids."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from curvediag.errors import RuleSchemaError
from curvediag.features import FEATURES, FeatureSettings, is_feature
from curvediag.features.registry import TEXT_SETTINGS
from curvediag.ruleset.schema import (
    AllOf,
    AnyOf,
    Comparison,
    Condition,
    NotOf,
    Rule,
    SeriesCondition,
)

__all__ = ["RuleSet", "builtin_rules_dir", "load_rule_file", "load_rules", "parse_overrides"]

_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_./-]*)(?::([^{}]*))?\}")
#: The format specs a template may use: sign, width and precision of at most two digits,
#: grouping and a number type (``.3g``, ``+.1%``, ``,.0f``, ``8.2e``). Anything else (a fill,
#: ``{x:999999999}``) could allocate gigabytes and is refused by validation.
SAFE_FORMAT_SPEC = re.compile(r"^[+\- ]?(?:[1-9][0-9]?)?[,_]?(?:\.[0-9]{1,2})?[eEfFgGd%]?$")


def builtin_rules_dir() -> Path:
    """Where the built-in rules live: inside the installed package, else the source tree."""
    packaged = resources.files("curvediag") / "_builtin_rules"
    if packaged.is_dir():
        return Path(str(packaged))
    source = Path(__file__).resolve().parents[2] / "rules"
    if source.is_dir():
        return source
    raise RuleSchemaError(None, None, "the built-in rules are missing from this installation")


@dataclass
class RuleSet:
    """Rules plus the parameter values in force (defaults with overrides applied)."""

    rules: list[Rule]
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    feature_settings: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def get(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError(rule_id)

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.rules]

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> RuleSet:
        """A copy with ``rule-id.param = value`` (and ``features.setting = value``) applied.

        Raises:
            RuleSchemaError: Unknown rule id, unknown parameter, or a value of the wrong type.
        """
        params = {rid: dict(p) for rid, p in self.params.items()}
        feats = dict(self.feature_settings)
        for key, value in (overrides or {}).items():
            if "." not in key:
                raise RuleSchemaError(None, None, f"override {key!r} must look like rule-id.param")
            rid, pname = key.split(".", 1)
            if rid == "features":
                if pname not in FeatureSettings.__dataclass_fields__:
                    known = ", ".join(sorted(FeatureSettings.__dataclass_fields__))
                    raise RuleSchemaError(
                        None, None, f"unknown feature setting {pname!r} (known: {known})"
                    )
                if pname in TEXT_SETTINGS:
                    if not isinstance(value, str) or not value.strip():
                        raise RuleSchemaError(
                            None, None, f"override {key!r}: {value!r} is not a name"
                        )
                    feats[pname] = value.strip()
                else:
                    feats[pname] = _as_number(value, key, feats.get(pname, 0.0))
                continue
            if rid not in params:
                raise RuleSchemaError(None, rid, f"override {key!r}: no rule with id {rid!r}")
            if pname not in params[rid]:
                known = ", ".join(sorted(params[rid])) or "none"
                raise RuleSchemaError(
                    None, rid, f"override {key!r}: unknown parameter (this rule has: {known})"
                )
            default = params[rid][pname]
            if isinstance(default, (int, float)):
                params[rid][pname] = _as_number(value, key, default)
            elif isinstance(default, str) and not isinstance(value, str):
                raise RuleSchemaError(
                    None, rid, f"override {key!r}: {value!r} is not a word (default {default!r})"
                )
            else:
                params[rid][pname] = value
        return RuleSet(list(self.rules), params, feats, dict(self.sources))


def _as_number(value: Any, key: str, default: Any = 0.0) -> float | int | bool:
    """``value`` as a parameter of the same kind as ``default`` (a finite number, or a bool)."""
    if isinstance(value, str):
        value = _yaml_value(value, key)
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        raise RuleSchemaError(None, None, f"override {key!r}: {shown} is not true or false")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RuleSchemaError(None, None, f"override {key!r}: {shown} is not a number")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer with hundreds of digits
        finite = False
    if not finite or abs(value) > 1e15:
        raise RuleSchemaError(
            None, None, f"override {key!r}: {shown} is not a finite number of sensible size"
        )
    return value


def _yaml_value(raw: str, key: str) -> Any:
    """A ``--set`` value: one YAML scalar (``0.1``, ``true``, ``cosine``)."""
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        problem = f"--set {key}: not a valid YAML value ({first})"
        raise RuleSchemaError(None, None, problem) from None
    if isinstance(value, (dict, list)):
        raise RuleSchemaError(
            None, None, f"--set {key}: expected one value (a number, true/false or a word)"
        )
    return value


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """Parse ``rule-id.param=value`` strings (CLI ``--set``); values are YAML scalars.

    Raises:
        RuleSchemaError: An item without ``=`` or whose value is not one YAML scalar.
    """
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise RuleSchemaError(None, None, f"--set {item!r}: expected rule-id.param=value")
        key, raw = item.split("=", 1)
        out[key.strip()] = _yaml_value(raw, key.strip())
    return out


def _walk(cond: Condition) -> Iterator[Comparison | SeriesCondition]:
    if isinstance(cond, AllOf):
        for c in cond.all:
            yield from _walk(c)
    elif isinstance(cond, AnyOf):
        for c in cond.any:
            yield from _walk(c)
    elif isinstance(cond, NotOf):
        yield from _walk(cond.not_)
    else:
        yield cond


def check_rule(rule: Rule, path: Path | None) -> None:
    """Reference checks the schema cannot express: features, params, template fields."""

    def fail(problem: str) -> None:
        raise RuleSchemaError(path, rule.id, problem)

    bindings: set[str] = set()
    used_params: set[str] = set()
    for leaf in _walk(rule.when):
        values: list[Any] = [leaf.value]
        if isinstance(leaf, Comparison):
            if not is_feature(leaf.feature):
                fail(f"unknown feature {leaf.feature!r} in 'when'")
            if leaf.op not in ("exists", "missing") and leaf.value is None:
                fail(f"comparison on {leaf.feature!r} with op {leaf.op!r} needs a value")
            target = leaf.value
            if isinstance(target, str) and target.startswith("$"):
                target = rule.params.get(target[1:])
            if leaf.op in ("<", "<=", ">", ">=") and isinstance(target, (str, bool)):
                fail(
                    f"'{leaf.feature} {leaf.op} {leaf.value}' compares with "
                    f"{'text' if isinstance(target, str) else 'true/false'} {target!r}: "
                    "'<', '<=', '>', '>=' need a number"
                )
        else:
            values.append(leaf.for_)
            if leaf.after and not is_feature(leaf.after):
                fail(f"unknown feature {leaf.after!r} in 'after'")
            if leaf.as_:
                bindings.update({f"{leaf.as_}.step", f"{leaf.as_}.count"})
            if isinstance(leaf.value, str) and not leaf.value.startswith("$"):
                fail(f"series condition on {leaf.series!r}: value must be a number or $param")
        for v in values:
            if isinstance(v, str) and v.startswith("$"):
                used_params.add(v[1:])
                if v[1:] not in rule.params:
                    fail(f"parameter {v!r} is used but not declared in 'params'")
    for name in [rule.onset, *(rule.steps or [])]:
        if name is not None and not is_feature(name):
            fail(f"unknown feature {name!r} in 'onset'/'steps'")
    known = set(FEATURES) | set(rule.params) | bindings
    for text in [rule.evidence, *rule.fixes]:
        for m in _FIELD.finditer(text):
            if m.group(1) not in known and not is_feature(m.group(1)):
                fail(f"template field {{{m.group(1)}}} is not a feature, parameter or match name")
            spec = m.group(2) or ""
            if not SAFE_FORMAT_SPEC.match(spec):
                fail(
                    f"template field {{{m.group(0)[1:-1]}}}: format spec {spec!r} is not allowed "
                    "(use at most a sign, a width and a precision of two digits, grouping and a "
                    "type such as .3g, +.1%, .2f, 8.2e)"
                )
    unused = set(rule.params) - used_params
    for text in [rule.evidence, *rule.fixes]:
        unused -= {m.group(1) for m in _FIELD.finditer(text)}
    if unused:
        fail(f"parameter(s) declared but never used: {', '.join(sorted(unused))}")


def load_rule_file(path: str | Path) -> list[Rule]:
    """Load one rule file (a single rule, or ``rules: [...]``), validated.

    Raises:
        RuleSchemaError: The file is unreadable, not YAML, or a rule in it is invalid.
    """
    p = Path(path)
    return list(_parse_rule_file(str(p), _read_rule_file(p)))


def _read_rule_file(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleSchemaError(p, None, f"cannot read rule file: {exc}") from None


@functools.lru_cache(maxsize=4096)
def _parse_rule_file(path: str, text: str) -> tuple[Rule, ...]:
    """Parse and validate one rule file's text, once per process for the same path and text
    (rules are never modified after loading; a changed file is parsed again)."""
    p = Path(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RuleSchemaError(p, None, f"not valid YAML: {exc}") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep, an absurd integer
        raise RuleSchemaError(p, None, f"not a usable YAML file ({type(exc).__name__})") from None
    if isinstance(data, dict) and "rules" in data and "id" not in data:
        items = data["rules"]
        if not isinstance(items, list):
            raise RuleSchemaError(p, None, "'rules' must be a list of rules")
        single = False
    elif isinstance(data, dict):
        items, single = [data], True
    else:
        raise RuleSchemaError(p, None, "a rule file holds a mapping (one rule) or 'rules: [...]'")
    rules = []
    for item in items:
        rid = item.get("id") if isinstance(item, dict) else None
        try:
            rule = Rule.model_validate(item)
        except ValidationError as exc:
            raise RuleSchemaError(p, rid, _pretty(exc, item)) from None
        if single and p.stem != rule.id:
            raise RuleSchemaError(p, rule.id, f"the id must equal the file name ({p.stem!r})")
        check_rule(rule, p)
        rules.append(rule)
    return tuple(rules)


def _pretty(exc: ValidationError, item: Any = None) -> str:
    errs = exc.errors()
    if isinstance(item, dict) and "when" in item and any(e["loc"][:1] == ("when",) for e in errs):
        from curvediag.ruleset.when_errors import explain_when

        line = explain_when(item["when"])
        if line:
            return line
    # For union branches, pydantic reports every branch: keep the shortest, most specific paths.
    lines = []
    for e in sorted(errs, key=lambda e: len(e["loc"]))[:4]:
        loc = ".".join(str(x) for x in e["loc"]) or "(top)"
        lines.append(f"{loc}: {e['msg']}")
    more = f" (+{len(errs) - 4} more)" if len(errs) > 4 else ""
    return "invalid rule: " + "; ".join(lines) + more


def _groups_in(path: Path) -> dict[str, list[str]] | None:
    """The named rule groups a file defines (``groups: {name: [rule ids]}``), or None when the
    file holds rules."""
    text = _read_rule_file(path)
    if not text.lstrip().startswith("groups:") and "\ngroups:" not in text:
        return None
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise RuleSchemaError(path, None, f"not valid YAML: {exc}") from None
    if not isinstance(data, dict) or set(data) != {"groups"}:
        return None
    raw = data["groups"]
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
        for k, v in raw.items()
    ):
        raise RuleSchemaError(path, None, "'groups' maps a name to a list of rule ids")
    return {str(k): [str(x) for x in v] for k, v in raw.items()}


def _expand_groups(rule: Rule, groups: Mapping[str, tuple[str, list[str]]], where: str) -> Rule:
    """``suppresses: ["@name", ...]`` with each group replaced by its members (order kept)."""
    if not any(s.startswith("@") for s in rule.suppresses):
        return rule
    key = (id(rule), tuple((k, tuple(v[1])) for k, v in sorted(groups.items())))
    cached = _EXPANDED.get(key)
    if cached is not None and cached[0] is rule:
        return cached[1]
    out: list[str] = []
    for s in rule.suppresses:
        if s.startswith("@"):
            if s[1:] not in groups:
                known = ", ".join(sorted(groups)) or "none"
                raise RuleSchemaError(where, rule.id, f"unknown rule group {s!r} (known: {known})")
            members = groups[s[1:]][1]
        else:
            members = [s]
        out += [m for m in members if m not in out and m != rule.id]
    expanded = rule.model_copy(update={"suppresses": out})
    _EXPANDED[key] = (rule, expanded)  # parsed once per process, expanded once too
    return expanded


#: (id of the parsed rule, groups) -> (that rule, its expanded copy)
_EXPANDED: dict[tuple[int, tuple[tuple[str, tuple[str, ...]], ...]], tuple[Rule, Rule]] = {}


def _rule_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(
            p
            for p in path.rglob("*.y*ml")
            if p.suffix in (".yaml", ".yml") and not p.name.endswith((".test.yaml", ".test.yml"))
        )
    return [path]


def load_rules(
    *paths: str | Path, builtin: bool = True, overrides: Mapping[str, Any] | None = None
) -> RuleSet:
    """Load the built-in rules and/or rule files and folders.

    Args:
        *paths: Extra rule files or folders (``*.yaml``, test files excluded).
        builtin: Include the built-in catalog.
        overrides: ``rule-id.param -> value`` (and ``features.setting -> value``).

    Raises:
        RuleSchemaError: Invalid file, duplicate id, or a suppression naming no known rule.
    """
    files: list[Path] = []
    if builtin:
        files += _rule_files(builtin_rules_dir())
    for p in paths:
        pp = Path(p)
        if not pp.exists():
            raise RuleSchemaError(pp, None, "rule file or folder not found")
        files += _rule_files(pp)
    rules: list[Rule] = []
    sources: dict[str, str] = {}
    groups: dict[str, tuple[str, list[str]]] = {}
    for f in files:
        named = _groups_in(f)
        if named is not None:
            for name, members in named.items():
                if name in groups:
                    raise RuleSchemaError(
                        f, None, f"group {name!r} is already defined in {groups[name][0]}"
                    )
                groups[name] = (str(f), members)
            continue
        for rule in load_rule_file(f):
            if rule.id in sources:
                raise RuleSchemaError(
                    f, rule.id, f"duplicate rule id (already defined in {sources[rule.id]})"
                )
            sources[rule.id] = str(f)
            rules.append(rule)
    ids = set(sources)
    rules = [_expand_groups(rule, groups, sources[rule.id]) for rule in rules]
    for name, (where, members) in groups.items():
        for m in members:
            if m not in ids:
                raise RuleSchemaError(where, None, f"group {name!r} names unknown rule {m!r}")
    for rule in rules:
        for s in rule.suppresses:
            if s not in ids:
                raise RuleSchemaError(sources[rule.id], rule.id, f"suppresses unknown rule {s!r}")
    rs = RuleSet(rules, {r.id: dict(r.params) for r in rules}, {}, sources)
    return rs.with_overrides(overrides) if overrides else rs
