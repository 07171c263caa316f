"""Experiment profiles live in profiles/NAME.yaml beside params.yaml: read with it, selected by
name like its own profiles, refused when a name is defined twice; params.yaml holds the user's."""

from __future__ import annotations

import pytest
import yaml

from conftest import PARAMS_FILE, REPO, tiny_profile
from tabrepro.config import Params, ParamsError, read_params_file


def test_repository_params_hold_user_profiles_and_the_files_the_experiments():
    plain = read_params_file(PARAMS_FILE, profile_files=False)
    assert set(plain["profiles"]) == {"quick", "reproduce", "paper"}
    files = {path.stem for path in (REPO / "profiles").glob("*.yaml")}
    assert {"bishop_cpu", "gpu_calibration", "isab", "npt_breast_cancer", "datasets_i_baselines"} <= files
    assert set(read_params_file(PARAMS_FILE)["profiles"]) == {"quick", "reproduce", "paper"} | files


def test_a_profile_file_is_selected_by_its_name_and_a_duplicate_is_refused(tmp_path):
    raw = read_params_file(PARAMS_FILE, profile_files=False)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "smoke.yaml").write_text(yaml.safe_dump(tiny_profile(["xgboost"])))
    params = Params.from_file(tmp_path / "params.yaml", profile="smoke")
    assert [job.model for job in params.jobs()] == ["xgboost"]
    (tmp_path / "profiles" / "quick.yaml").write_text(yaml.safe_dump(tiny_profile(["knn"])))
    with pytest.raises(ParamsError, match="quick.yaml: profile 'quick' is also defined"):
        Params.from_file(tmp_path / "params.yaml")
