"""The vocabulary a model uses to declare its hyperparameters: rules (`Accept` alternatives) and
the `Hyperparameters` declaration its `declared_hyperparameters()` returns.

A rule is a tuple of `Accept` alternatives; a value is accepted when any alternative admits it.
The declaration names what the wrapper reads itself, the library names it sets itself (refused,
with the reason), rules narrower than the library's signature says, and extra values it
translates into the library's terms. tabrepro.models.hyperparameters joins a declaration with the
library's own signatures (the generated manifest) and checks params.yaml against the result; this
module imports no model and no library, so every model module can import it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tabrepro.tasks import TASK_FAMILIES

__all__ = [
    "Accept",
    "Rule",
    "Hyperparameters",
    "FAMILIES",
    "describe_rule",
    "rule_admits",
    "integer",
    "number",
    "options",
    "nullable",
    "boolean",
    "estimator_library",
    "dataclass_rules",
]

FAMILIES: tuple[str, ...] = TASK_FAMILIES
TYPES: tuple[str, ...] = ("int", "float", "real_not_int", "str", "bool", "null", "sequence", "any")
CLOSED: tuple[str, ...] = ("both", "left", "right", "neither")


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


def annotation_rule(annotation: Any) -> Rule:
    """The YAML-expressible values of a type annotation (callables, objects: none)."""
    if annotation is inspect.Parameter.empty or annotation is Any or isinstance(annotation, str):
        return (Accept("any"),)
    if annotation is None or annotation is type(None):
        return (Accept("null"),)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or (origin is not None and origin.__name__ == "UnionType"):
        return tuple(a for arg in typing.get_args(annotation) for a in annotation_rule(arg))
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
    return {item.name: annotation_rule(hints[item.name]) for item in dataclasses.fields(config_class)}
