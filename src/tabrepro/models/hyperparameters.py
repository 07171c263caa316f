"""Which hyperparameters each registered model accepts, so that params.yaml cannot lie about them.

Why this exists: a misspelt search-space key (`max_dept`) used to pass validation; XGBoost took it
as one of its free keyword arguments, ignored it (its warning silenced) and the job recorded
`{'max_dept': 3}` as the selected configuration. Every search-space name and value is now
checked against what the model really accepts when params.yaml is loaded (tabrepro.config), by
the CLI, by Snakemake and by every job alike.

What a model accepts comes from two places:

* the library's own estimator: the keyword names of its constructor (walking up to the base
  class when it forwards `**kwargs`, as XGBClassifier does), their annotated types, and for
  scikit-learn estimators `_parameter_constraints` (types, ranges, string options). Importing
  scikit-learn, XGBoost, CatBoost, LightGBM and torch costs seconds, which every Snakemake start
  and every job would pay, so these facts are extracted once into `hyperparameters.json` beside
  this module by `python -m tabrepro.models.hyperparameters --write`; a test regenerates it from
  the installed libraries and compares, so a version bump cannot change them unnoticed;
* the model's own declaration, `declared_hyperparameters()` (a `Hyperparameters`): the names its
  wrapper reads itself, the library names it sets itself (refused, with the reason), rules
  narrower than the library's signature says (ranges its documentation gives only in prose), and
  extra values it translates into the library's terms (random forest's `max_features: all`).

A rule is a tuple of `Accept` alternatives; a value is accepted when any alternative admits it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import sys
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabrepro.tasks import TASK_FAMILIES

__all__ = [
    "Accept",
    "Rule",
    "Hyperparameters",
    "FAMILIES",
    "MANIFEST_PATH",
    "accepted",
    "check_params",
    "describe_rule",
    "rule_admits",
    "integer",
    "number",
    "options",
    "nullable",
    "boolean",
    "estimator_library",
    "dataclass_rules",
    "build_manifest",
    "read_manifest",
]

FAMILIES: tuple[str, ...] = TASK_FAMILIES
TYPES: tuple[str, ...] = ("int", "float", "real_not_int", "str", "bool", "null", "sequence", "any")
CLOSED: tuple[str, ...] = ("both", "left", "right", "neither")
MANIFEST_PATH = Path(__file__).with_name("hyperparameters.json")
# Distributions a params.yaml spec may name (tabrepro.tuning); repeated here because importing
# tuning pulls in scipy, which the load-time check must not pay for.
_RANGE_KINDS = ("int", "log_int", "uniform", "log_uniform")
_SPEC_KINDS = ("choice", *_RANGE_KINDS)
# Libraries whose versions the manifest records (import names).
_LIBRARIES = ("sklearn", "xgboost", "lightgbm", "catboost", "pytorch_tabnet", "rtdl_revisiting_models")


# ----------------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class Accept:
    """One kind of value a hyperparameter takes: a type, optionally listed options or a range.

    `float` admits ints too (YAML writes 1 for 1.0); `real_not_int` admits floats only (where
    scikit-learn reads an int as a count and a float as a fraction); `int` never admits a bool.
    """

    type: str
    options: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    closed: str = "both"  # which of the finite bounds belong to the range

    def __post_init__(self) -> None:
        if self.type not in TYPES or self.closed not in CLOSED:
            raise ValueError(f"bad Accept({self.type!r}, closed={self.closed!r})")

    def admits_type(self, value: Any) -> bool:
        if self.type == "any":
            return True
        if self.type == "null":
            return value is None
        if isinstance(value, bool):
            return self.type == "bool"
        return {
            "int": isinstance(value, int),
            "float": isinstance(value, (int, float)),
            "real_not_int": isinstance(value, float),
            "str": isinstance(value, str),
            "sequence": isinstance(value, (list, tuple)),
        }.get(self.type, False)

    def admits(self, value: Any) -> bool:
        if not self.admits_type(value):
            return False
        if self.options is not None and not any(_same(value, o) for o in self.options):
            return False
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return self.contains(value, value)
        return True

    def contains(self, low: float, high: float, lenient_ends: bool = False) -> bool:
        """Whether [low, high] lies inside this range; `lenient_ends` lets an end of the interval
        touch an excluded bound (a continuous draw lands on an end point with probability 0)."""
        if isinstance(low, float) and math.isnan(low):
            return False
        if self.low is not None:
            inclusive = self.closed in ("both", "left") or (lenient_ends and low < high)
            if low < self.low or (low == self.low and not inclusive):
                return False
        if self.high is not None:
            inclusive = self.closed in ("both", "right") or (lenient_ends and low < high)
            if high > self.high or (high == self.high and not inclusive):
                return False
        return True

    def describe(self) -> str:
        names = {
            "int": "an int",
            "float": "a number",
            "real_not_int": "a float",
            "str": "a string",
            "bool": "true/false",
            "null": "null",
            "sequence": "a list",
            "any": "anything",
        }
        if self.options is not None:
            return "one of " + ", ".join(repr(o) for o in self.options)
        text = names[self.type]
        if self.low is not None and self.high is not None:
            left = "[" if self.closed in ("both", "left") else "("
            right = "]" if self.closed in ("both", "right") else ")"
            text += f" in {left}{self.low}, {self.high}{right}"
        elif self.low is not None:
            text += (" >= " if self.closed in ("both", "left") else " > ") + str(self.low)
        elif self.high is not None:
            text += (" <= " if self.closed in ("both", "right") else " < ") + str(self.high)
        return text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.options is not None:
            out["options"] = list(self.options)
        if self.low is not None:
            out["low"] = self.low
        if self.high is not None:
            out["high"] = self.high
        if self.closed != "both":
            out["closed"] = self.closed
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Accept:
        options = raw.get("options")
        return cls(
            raw["type"],
            None if options is None else tuple(options),
            raw.get("low"),
            raw.get("high"),
            raw.get("closed", "both"),
        )


def _same(value: Any, option: Any) -> bool:
    """Equality that keeps True apart from 1 and compares NaN/inf options sensibly."""
    if isinstance(value, bool) != isinstance(option, bool):
        return False
    return value == option


Rule = tuple[Accept, ...]


def rule_admits(rule: Rule, value: Any) -> bool:
    return any(alternative.admits(value) for alternative in rule)


def describe_rule(rule: Rule) -> str:
    if not rule:
        return "nothing params.yaml can express"
    return " or ".join(alternative.describe() for alternative in rule)


def integer(low: int | None = None, high: int | None = None, closed: str = "both") -> Rule:
    return (Accept("int", low=low, high=high, closed=closed),)


def number(low: float | None = None, high: float | None = None, closed: str = "both") -> Rule:
    return (Accept("float", low=low, high=high, closed=closed),)


def options(*values: Any) -> Rule:
    kinds = {type(v) for v in values}
    kind = {str: "str", bool: "bool", int: "int", float: "float"}[kinds.pop()] if len(kinds) == 1 else "any"
    return (Accept(kind, options=tuple(values)),)


def nullable(rule: Rule) -> Rule:
    return (*rule, Accept("null"))


def boolean() -> Rule:
    return (Accept("bool"),)


# ----------------------------------------------------------------------------- declarations
# Why a search space may not set a name (shown in the error): the settings wrappers own.
SEED = "tabrepro derives every seed from params.yaml's root seed and the job's names"
THREADS = "tabrepro sets the thread count from the job's --threads"
LOGGING = "tabrepro sets the library's logging (warnings reach the job's log)"
DATA_SHAPE = "tabrepro sets it from the data"

# TorchModel's training-loop keys (its TRAINING_DEFAULTS); a test keeps the two in step.
TORCH_TRAINING_RULES: dict[str, Rule] = {
    "lr": number(0.0, None, closed="neither"),
    "weight_decay": number(0.0),
    "batch_size": integer(1),
    "max_epochs": integer(1),
    "patience": integer(1),
    "lr_scheduler": boolean(),
    "lr_patience": integer(1),
}
DROPOUT: Rule = number(0.0, 1.0, closed="left")
FRACTION_OPEN_LOW: Rule = number(0.0, 1.0, closed="right")

LibraryLoader = Callable[[], Mapping[str, Sequence[Callable[..., Any]]]]


@dataclass(frozen=True)
class Hyperparameters:
    """What a model's search space may set (a model's `declared_hyperparameters()`).

    library: imports the library and returns, per task family, the callables (estimator classes,
        network constructors) whose keyword arguments the model passes through; None for a model
        without one (NPT, BiSHop). Only the manifest generator calls it.
    owned: library names the wrapper sets itself or makes meaningless, each with the reason shown
        when a search space tries to set it.
    reads: names the wrapper reads itself, and rules that replace the library's for a name.
    translates: extra values the wrapper maps onto the library's (added to its rule).
    """

    library: LibraryLoader | None = None
    owned: Mapping[str, str] = field(default_factory=dict)
    reads: Mapping[str, Rule] = field(default_factory=dict)
    translates: Mapping[str, Rule] = field(default_factory=dict)


def estimator_library(model_class: Any) -> LibraryLoader:
    """The loader for an `EstimatorModel`: its (classifier, regressor) classes."""

    def load() -> dict[str, tuple[Callable[..., Any], ...]]:
        classifier, regressor = model_class._estimator_classes()
        return {"classification": (classifier,), "regression": (regressor,)}

    return load


def _annotation_rule(annotation: Any) -> Rule:
    """The YAML-expressible values of a type annotation (callables, objects: none)."""
    if annotation is inspect.Parameter.empty or annotation is Any or isinstance(annotation, str):
        return (Accept("any"),)
    if annotation is None or annotation is type(None):
        return (Accept("null"),)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or (origin is not None and origin.__name__ == "UnionType"):
        return tuple(a for arg in typing.get_args(annotation) for a in _annotation_rule(arg))
    if origin is typing.Literal:
        return options(*typing.get_args(annotation))
    if origin in (list, tuple, Sequence, typing.Sequence, Iterable) or annotation in (list, tuple):
        return (Accept("sequence"),)
    simple = {bool: "bool", int: "int", float: "float", str: "str"}
    if annotation in simple:
        return (Accept(simple[annotation]),)
    return ()


def dataclass_rules(
    config_class: type,
    exclude: Iterable[str] = (),
    ranges: Mapping[str, tuple[float | None, float | None, str]] | None = None,
) -> dict[str, Rule]:
    """Rules for a configuration dataclass's fields (NPTConfig, BiSHopConfig): the annotated
    types, with `ranges` (low, high, closed) applied to a field's numeric alternatives."""
    typed = _field_rules(config_class)
    ranges = ranges or {}
    unknown = sorted(set(ranges) - set(typed))
    if unknown:
        raise ValueError(f"ranges for fields {config_class.__name__} does not have: {unknown}")
    rules: dict[str, Rule] = {}
    for name, rule in typed.items():
        if name in exclude:
            continue
        if name in ranges:
            low, high, closed = ranges[name]
            rule = tuple(
                dataclasses.replace(a, low=low, high=high, closed=closed)
                if a.type in ("int", "float") and a.options is None
                else a
                for a in rule
            )
        rules[name] = rule
    return rules


@functools.cache
def _field_rules(config_class: type) -> dict[str, Rule]:
    """Each field's rule from its annotation (cached: evaluating annotations is the slow part)."""
    hints = typing.get_type_hints(config_class)
    return {item.name: _annotation_rule(hints[item.name]) for item in dataclasses.fields(config_class)}


# --------------------------------------------------------------- extraction from the libraries
def _signature_parameters(target: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """Named keyword parameters of a constructor; a class forwarding **kwargs to its base class
    (XGBClassifier -> XGBModel) contributes its bases' names from the same library."""
    found: dict[str, inspect.Parameter] = {}
    if not isinstance(target, type):
        chain: list[Callable[..., Any]] = [target]
    else:
        package = target.__module__.split(".")[0]
        chain = [
            k.__dict__["__init__"]
            for k in target.__mro__
            if "__init__" in k.__dict__ and k.__module__.split(".")[0] == package
        ]
    for function in chain:
        try:
            signature = inspect.signature(function, eval_str=True)
        except (NameError, TypeError):  # an annotation that cannot be evaluated: names only
            signature = inspect.signature(function)
        forwards = False
        for name, parameter in signature.parameters.items():
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                forwards = True
            elif (
                parameter.kind not in (inspect.Parameter.VAR_POSITIONAL,)
                and name != "self"
                and not name.startswith("_")
            ):
                found.setdefault(name, parameter)
        if not forwards:
            break
    return found


def _sklearn_rule(constraints: Sequence[Any]) -> Rule:
    """scikit-learn's `_parameter_constraints` entry for one parameter, as Accept alternatives."""
    import numbers

    from sklearn.utils import _param_validation as pv

    def type_name(kind: Any) -> str | None:
        if kind is pv.RealNotInt:
            return "real_not_int"
        if isinstance(kind, type) and issubclass(kind, bool):
            return "bool"
        if kind in (numbers.Integral, int):
            return "int"
        if kind in (numbers.Real, float, numbers.Number):
            return "float"
        if kind is str:
            return "str"
        if kind in (list, tuple):
            return "sequence"
        return None

    out: list[Accept] = []
    for constraint in constraints:
        if isinstance(constraint, pv.Hidden):
            constraint = constraint.constraint
        if constraint is None:
            out.append(Accept("null"))
        elif isinstance(constraint, pv.Interval):
            low = None if constraint.left is None else float(constraint.left)
            high = None if constraint.right is None else float(constraint.right)
            name = type_name(constraint.type)
            if name == "int":
                low = None if low is None else int(low)
                high = None if high is None else int(high)
            out.append(Accept(name or "any", low=low, high=high, closed=constraint.closed))
        elif isinstance(constraint, pv.Options):  # StrOptions too
            out.append(Accept(type_name(constraint.type) or "any", options=tuple(sorted(constraint.options, key=repr))))
        elif constraint == "boolean":
            out.append(Accept("bool"))
        elif constraint == "array-like":
            out.append(Accept("sequence"))
        elif constraint == "random_state":
            out.extend((Accept("int", low=0, high=2**32 - 1), Accept("null")))
        elif constraint == "verbose":
            out.extend((Accept("int"), Accept("bool")))
        elif isinstance(constraint, type) and type_name(constraint):
            out.append(Accept(type_name(constraint)))  # type: ignore[arg-type]
        elif (
            constraint in ("sparse matrix", "cv_object", "nan", "missing_values")
            or callable(constraint)
            or isinstance(constraint, (type, pv.HasMethods, pv.MissingValues))
        ):
            continue  # nothing a YAML value can be (a callable, an object, a matrix)
        else:
            raise TypeError(f"unknown scikit-learn constraint {constraint!r}; teach _sklearn_rule about it")
    return tuple(out)


def library_rules(callables: Sequence[Callable[..., Any]]) -> dict[str, Rule]:
    """Accepted names and rules of the given constructors (the union of their keywords)."""
    rules: dict[str, Rule] = {}
    for target in callables:
        constraints = getattr(target, "_parameter_constraints", None) or {}
        for name, parameter in _signature_parameters(target).items():
            if name in rules:
                continue
            rules[name] = (
                _sklearn_rule(constraints[name]) if name in constraints else _annotation_rule(parameter.annotation)
            )
    return dict(sorted(rules.items()))


def _versions() -> dict[str, str]:
    """Installed distribution and version per library (xgboost ships as xgboost-cpu here)."""
    from importlib import metadata

    distributions = metadata.packages_distributions()
    versions = {}
    for module in _LIBRARIES:
        for dist in sorted(set(distributions.get(module, []))):
            versions[dist] = metadata.version(dist)
    return versions


def build_manifest() -> dict[str, Any]:
    """The library half of every registered model's hyperparameters (imports every library)."""
    from tabrepro.models.registry import MODEL_REGISTRY

    models: dict[str, Any] = {}
    for name, model_class in sorted(MODEL_REGISTRY.items()):
        declared = model_class.declared_hyperparameters()
        if declared.library is None:
            continue
        per_family = {
            family: {key: [a.to_json() for a in rule] for key, rule in library_rules(callables).items()}
            for family, callables in declared.library().items()
        }
        if set(per_family) != set(FAMILIES):
            raise ValueError(f"{name}: library() must return {FAMILIES}, got {sorted(per_family)}")
        models[name] = per_family
    return {
        "about": "Generated by `python -m tabrepro.models.hyperparameters --write` from the installed "
        "libraries' signatures and scikit-learn's _parameter_constraints; do not edit.",
        "libraries": _versions(),
        "models": models,
    }


def _dump(manifest: Mapping[str, Any]) -> str:
    """JSON with one line per hyperparameter, so that a library update reads as a short diff."""
    lines = [
        "{",
        f' "about": {json.dumps(manifest["about"])},',
        f' "libraries": {json.dumps(manifest["libraries"], sort_keys=True)},',
        ' "models": {',
    ]
    models = manifest["models"]
    for i, (model, families) in enumerate(sorted(models.items())):
        lines.append(f"  {json.dumps(model)}: {{")
        for j, (family, rules) in enumerate(sorted(families.items())):
            lines.append(f"   {json.dumps(family)}: {{")
            entries = [
                f"    {json.dumps(name)}: {json.dumps(rule, sort_keys=True)}" for name, rule in sorted(rules.items())
            ]
            lines.append(",\n".join(entries))
            lines.append("   }" + ("," if j < len(families) - 1 else ""))
        lines.append("  }" + ("," if i < len(models) - 1 else ""))
    lines.extend([" }", "}"])
    text = "\n".join(lines) + "\n"
    if json.loads(text) != json.loads(json.dumps(manifest)):
        raise AssertionError("manifest layout lost information")
    return text


@functools.cache
def read_manifest() -> dict[str, Any]:
    if not MANIFEST_PATH.is_file():
        raise RuntimeError(f"{MANIFEST_PATH} is missing: run `python -m tabrepro.models.hyperparameters --write`")
    return json.loads(MANIFEST_PATH.read_text())


# ------------------------------------------------------------------------------ the check
@dataclass(frozen=True)
class Accepted:
    """What a model accepts for one task family: rules by name, and the refused names' reasons."""

    rules: Mapping[str, Rule]
    owned: Mapping[str, str]


@functools.cache
def accepted(model: str, family: str) -> Accepted:
    """The names and rules `model` accepts for a task family (manifest + the model's declaration)."""
    declared = _declared(model)
    rules: dict[str, Rule] = {}
    if declared.library is not None:
        stored = read_manifest()["models"].get(model)
        if stored is None:
            raise RuntimeError(
                f"{MANIFEST_PATH.name} has no entry for model {model!r}: run "
                f"`python -m tabrepro.models.hyperparameters --write`"
            )
        rules = {key: tuple(Accept.from_json(a) for a in alternatives) for key, alternatives in stored[family].items()}
    for key in declared.owned:
        rules.pop(key, None)
    rules.update(declared.reads)
    for key, extra in declared.translates.items():
        rules[key] = (*rules.get(key, ()), *extra)
    return Accepted(rules, dict(declared.owned))


@functools.cache
def _declared(model: str) -> Hyperparameters:
    from tabrepro.models.registry import get_model_class

    return get_model_class(model).declared_hyperparameters()


class _Failure(Exception):
    def __init__(self, path: list[Any], message: str) -> None:
        super().__init__(message)
        self.path, self.message = path, message


def check_params(
    model: str,
    params: Mapping[str, Any],
    families: Iterable[str] | None,
    did_you_mean: Callable[[str, Iterable[str]], str],
) -> tuple[list[Any], str] | None:
    """The first problem of a model's params mapping as (path below it, message), or None.

    families: the task families the mapping is used for (every one must accept each value); None
        when no dataset uses it (a value must then suit at least one family). A per-task branch
        ({classification: ..., regression: ...}) is checked against its own family.
    """
    used = tuple(families) if families else None
    try:
        for name, spec in params.items():
            _check_name(model, str(name), used, did_you_mean)
            _check_spec(model, str(name), spec, used, [name])
    except _Failure as failure:
        return failure.path, failure.message
    return None


def _check_name(
    model: str, name: str, used: tuple[str, ...] | None, did_you_mean: Callable[[str, Iterable[str]], str]
) -> None:
    tables = [accepted(model, f) for f in (used or FAMILIES)]
    owned = next((t.owned[name] for t in tables if name in t.owned), None)
    if owned is not None:
        raise _Failure([name], f"{model!r} does not take {name!r} from a search space: {owned}")
    present = [name in t.rules for t in tables]
    if all(present) or (used is None and any(present)):
        return
    known = set().union(*(t.rules for t in tables))
    if any(present):
        missing = [f for f, p in zip(used or FAMILIES, present) if not p]
        raise _Failure([name], f"{model!r} accepts {name!r} only for some tasks, not {', '.join(missing)}")
    raise _Failure([name], f"unknown hyperparameter {name!r} for model {model!r}" + did_you_mean(name, known))


def _check_spec(model: str, name: str, spec: Any, used: tuple[str, ...] | None, path: list[Any]) -> None:
    if isinstance(spec, Mapping) and spec and set(spec) <= set(FAMILIES):
        for family, branch in spec.items():
            _check_spec(model, name, branch, (family,), [*path, family])
        return
    if isinstance(spec, Mapping) and len(spec) == 1 and next(iter(spec)) in _SPEC_KINDS:
        kind, body = next(iter(spec.items()))
        if kind == "choice":
            for i, value in enumerate(body):
                _check_value(model, name, value, used, [*path, "choice", i])
        else:
            _check_range(model, name, kind, body, used, [*path, kind])
        return
    _check_value(model, name, spec, used, path)


def _rules_for(model: str, name: str, used: tuple[str, ...] | None) -> list[Rule]:
    return [accepted(model, f).rules[name] for f in (used or FAMILIES) if name in accepted(model, f).rules]


def _verdict(results: list[bool], used: tuple[str, ...] | None) -> bool:
    return all(results) if used else any(results)


def _check_value(model: str, name: str, value: Any, used: tuple[str, ...] | None, path: list[Any]) -> None:
    rules = _rules_for(model, name, used)
    if not _verdict([rule_admits(rule, value) for rule in rules], used):
        raise _Failure(path, f"{value!r} is not accepted by {model}'s {name!r} (takes {describe_rule(rules[0])})")


def _check_range(model: str, name: str, kind: str, bounds: Any, used: tuple[str, ...] | None, path: list[Any]) -> None:
    """Every value a range can draw must be accepted: an int range value by value (or inside one
    interval), a continuous range inside one float interval."""
    low, high = bounds
    rules = _rules_for(model, name, used)
    if kind in ("int", "log_int"):
        low, high = int(low), int(high)

        def ok(rule: Rule) -> bool:
            if any(a.type in ("int", "float", "any") and a.options is None and a.contains(low, high) for a in rule):
                return True
            return high - low <= 10_000 and all(rule_admits(rule, v) for v in range(low, high + 1))
    else:
        low, high = float(low), float(high)

        def ok(rule: Rule) -> bool:
            if low == high:
                return rule_admits(rule, low)
            return any(
                a.type in ("float", "real_not_int", "any")
                and a.options is None
                and a.contains(low, high, lenient_ends=True)
                for a in rule
            )

    if not _verdict([ok(rule) for rule in rules], used):
        raise _Failure(
            path,
            f"{kind} range [{bounds[0]}, {bounds[1]}] reaches values {model}'s {name!r} "
            f"does not accept (takes {describe_rule(rules[0])})",
        )


# ------------------------------------------------------------------------------ command line
def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m tabrepro.models.hyperparameters",
        description="Regenerate or check hyperparameters.json from the installed libraries.",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help=f"write {MANIFEST_PATH.name}")
    group.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args(argv)
    text = _dump(build_manifest())
    if args.write:
        from tabrepro.io import atomic_write

        atomic_write(MANIFEST_PATH, text)
        print(MANIFEST_PATH)
        return 0
    if not MANIFEST_PATH.is_file() or MANIFEST_PATH.read_text() != text:
        print(f"{MANIFEST_PATH} differs from the installed libraries: run with --write", file=sys.stderr)
        return 1
    print(f"{MANIFEST_PATH}: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
