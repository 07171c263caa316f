"""benchmarks.steps.common: what the benchmarks and scripts share."""

from __future__ import annotations

import pytest

from benchmarks.steps.common import parse_overrides


def test_overrides_take_json_values_else_the_text_and_need_an_equals_sign():
    assert parse_overrides(["d_model=16", "bf16_autocast=true", "attention=gsh", "beta=null"]) == {
        "d_model": 16,
        "bf16_autocast": True,
        "attention": "gsh",
        "beta": None,
    }
    assert parse_overrides([]) == {}
    with pytest.raises(ValueError, match="--set 'd_model': expected KEY=VALUE"):
        parse_overrides(["d_model"])
