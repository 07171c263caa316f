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

The rules and the declaration live in tabrepro.models.rules (which the model modules import);
this module holds the manifest's extraction and the check, and imports the registry.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import numbers
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from tabrepro.io import atomic_write
from tabrepro.models.registry import MODEL_REGISTRY, get_model_class
from tabrepro.models.rules import FAMILIES, Accept, Hyperparameters, Rule, annotation_rule, describe_rule, rule_admits

__all__ = [
    "MANIFEST_PATH",
    "accepted",
    "check_params",
    "library_rules",
    "build_manifest",
    "read_manifest",
]

MANIFEST_PATH = Path(__file__).with_name("hyperparameters.json")
# Distributions a params.yaml spec may name (tabrepro.tuning); repeated here because importing
# tuning pulls in scipy, which the load-time check must not pay for.
_RANGE_KINDS = ("int", "log_int", "uniform", "log_uniform")
_SPEC_KINDS = ("choice", *_RANGE_KINDS)
# Libraries whose versions the manifest records (import names).
_LIBRARIES = ("sklearn", "xgboost", "lightgbm", "catboost", "pytorch_tabnet", "rtdl_revisiting_models")


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

    from sklearn.utils import _param_validation as pv  # deferred: loads sklearn

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
                _sklearn_rule(constraints[name]) if name in constraints else annotation_rule(parameter.annotation)
            )
    return dict(sorted(rules.items()))


def _versions() -> dict[str, str]:
    """Installed distribution and version per library (xgboost ships as xgboost-cpu here)."""

    distributions = metadata.packages_distributions()
    versions = {}
    for module in _LIBRARIES:
        for dist in sorted(set(distributions.get(module, []))):
            versions[dist] = metadata.version(dist)
    return versions


def build_manifest() -> dict[str, Any]:
    """The library half of every registered model's hyperparameters (imports every library)."""
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
