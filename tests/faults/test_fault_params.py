"""Fault injection on params.yaml: what the workflow would stop on later (or, worse, run with a
value nobody meant) is refused when the file is read, with one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import PARAMS_FILE, repo_raw_params, tiny_profile, write_params
from tabrepro.cli import main
from tabrepro.config import Params, ParamsError, read_params_file, validate_schema


def test_a_duplicate_key_is_refused_naming_its_line(tmp_path: Path) -> None:
    text = PARAMS_FILE.read_text()
    assert text.count("\nseed: ") == 1
    path = tmp_path / "params.yaml"
    path.write_text(text.replace("\nseed: ", "\nseed: 7\nseed: ", 1))
    with pytest.raises(
        ParamsError, match=r"line \d+, column \d+ not valid YAML: duplicate key 'seed' \(first at line \d+\)"
    ):
        read_params_file(path)


def test_a_duplicate_key_stops_validate_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_params(tmp_path, tiny_profile(["mlp"]))
    text = path.read_text()
    assert text.count("\nprofile: tiny\n") + text.startswith("profile: tiny\n") == 1
    path.write_text(text.replace("profile: tiny\n", "profile: tiny\nprofile: quick\n", 1))
    assert main(["--params", str(path), "validate"]) == 2
    assert "duplicate key 'profile'" in capsys.readouterr().err


def test_a_name_ending_in_a_newline_is_refused() -> None:
    raw = repo_raw_params()
    raw["profiles"]["tiny\n"] = tiny_profile(["mlp"])
    with pytest.raises(ParamsError, match="is not a usable name"):
        validate_schema(raw)


def test_repeated_folds_are_refused() -> None:
    raw = repo_raw_params()
    raw["profiles"]["tiny"] = tiny_profile(["mlp"], folds=[0, 0])
    with pytest.raises(ParamsError, match=r"at profiles\.tiny\.folds"):
        validate_schema(raw)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_fraction_must_be_finite(value: float) -> None:
    raw = repo_raw_params()
    protocol = next(p for p in raw["protocols"].values() if "val_fraction" in p)
    protocol["val_fraction"] = value
    with pytest.raises(ParamsError, match=r"val_fraction: a finite number is needed"):
        validate_schema(raw)


def test_nan_written_in_yaml_is_refused(tmp_path: Path) -> None:
    raw = repo_raw_params()
    name = next(n for n, p in raw["protocols"].items() if "val_fraction" in p)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    text = path.read_text()
    block = text.index(f"\n  {name}:")
    at = text.index("val_fraction: ", block)
    end = text.index("\n", at)
    path.write_text(text[:at] + "val_fraction: .nan" + text[end:])
    with pytest.raises(ParamsError, match=rf"protocols\.{name}\.val_fraction: a finite number"):
        Params.from_file(path)


def test_validate_refuses_a_sparsity_model_that_does_not_run_on_a_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def sparsity_on_a_model_not_run(raw: dict) -> None:
        raw["feature_sparsity"]["tiny"] = {"paper": "npt", "models": ["xgboost"]}

    path = write_params(tmp_path, tiny_profile(["mlp"]), mutate=sparsity_on_a_model_not_run)
    assert main(["--params", str(path), "validate"]) == 2
    err = capsys.readouterr().err
    assert "feature_sparsity.tiny.models: 'xgboost' does not run on npt/breast_cancer" in err
