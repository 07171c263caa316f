"""The plain-dict round trip of a network's dataclass config (NPTConfig, BiSHopConfig).

The dict is what checkpoints store (and compare on resume) and what the model registry passes in
from params.yaml. This module imports no torch: the configs are loaded by every Snakemake start.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

__all__ = ["ConfigDictMixin", "check_onednn_setting"]


class ConfigDictMixin:
    """to_dict / from_dict / replace for a dataclass config."""

    # set by @dataclass on each config class; declared so that the mixin's methods type-check
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        """The config from a dict, refusing unknown keys (a typo would silently be a default)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown {cls.__name__} field(s): {', '.join(unknown)}")
        return cls(**values)

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)


def check_onednn_setting(value: Any) -> None:
    """Refuse an `onednn_linear` other than a boolean or "auto" (1 and 0 compare equal to the
    booleans, so a membership test would let them through)."""
    if not (isinstance(value, bool) or value == "auto"):
        raise ValueError(f"onednn_linear must be true, false or 'auto', got {value!r}")
