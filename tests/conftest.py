"""What many test files share: the repository's path, its params.yaml, and small profiles written
to a scratch directory.

Module-level code of a test file may `from conftest import REPO, ...` (pytest puts tests/ on
sys.path); tests take the fixtures by name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PARAMS_FILE = REPO / "params.yaml"


def repo_raw_params() -> dict:
    """A fresh copy of the repository's params.yaml, as loaded YAML (safe to edit)."""
    return yaml.safe_load(PARAMS_FILE.read_text())


@pytest.fixture(scope="session")
def repo_params():
    """The repository's params.yaml with its default profile (read-only: do not edit `.raw`)."""
    from tabrepro.config import Params

    return Params.from_file(PARAMS_FILE)
