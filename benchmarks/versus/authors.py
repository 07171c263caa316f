"""Obtaining the authors' code into a scratch directory, and running it in a process of its own.

Their code never enters this project: `obtain` clones a git repository (a local bare or
non-bare repository, or a URL) into a scratch directory outside the project and checks out the
requested revision, or uses a plain (non-git) directory where it is, after checking that it too
lies outside the project. `run_driver` then starts `python -m benchmarks.versus.driver` with that
directory on its import path, in a fresh process per measurement, and reads back the figures it
writes as JSON (never a pickle).

Dependencies the authors' step needs and this environment lacks (einops, for BiSHop) go into
`<scratch>/deps` with pip when `--install-deps` is given; their other imports are stubbed
(benchmarks.versus.stubs).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.paths import REPO_ROOT, pythonpath
from tabrepro.errors import InputError
from tabrepro.io import write_json

__all__ = [
    "VersusError",
    "AuthorsCode",
    "chosen_cases",
    "PROJECT_ROOT",
    "is_url",
    "check_source",
    "check_outside_project",
    "obtain",
    "ensure_deps",
    "run_driver",
]

# The repository this package belongs to: the authors' code must not be put anywhere below it.
PROJECT_ROOT = REPO_ROOT

CaseT = TypeVar("CaseT")

_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")  # git@github.com:owner/repo


class VersusError(InputError):
    """Bad input to the comparison (a missing repository, an unknown case, a missing dependency):
    the command prints it as one line and exits with status 2."""


def chosen_cases(names: Sequence[str] | None, default: Sequence[str], known: Mapping[str, CaseT]) -> list[CaseT]:
    """The cases named on the command line (or the default ones), each once, in the order given;
    an unknown name is a VersusError that lists the known ones."""
    chosen = names or default
    unknown = [name for name in chosen if name not in known]
    if unknown:
        raise VersusError(f"unknown case {unknown[0]!r} (known: {', '.join(known)})")
    return [known[name] for name in dict.fromkeys(chosen)]


@dataclass(frozen=True)
class AuthorsCode:
    """Where one repository's code ended up and which version it is."""

    source: str  # as given on the command line
    path: Path  # the directory put on the driver's import path
    commit: str  # the checked-out commit, or "unknown (plain directory)"
    kind: str  # "git clone" or "plain directory"

    def describe(self) -> dict[str, str]:
        """What a record says of it: the code by repository and commit, never where it lay here."""
        return {"source": public_source(self.source, self.path), "commit": self.commit, "kind": self.kind}


def public_source(source: str, path: Path | None = None) -> str:
    """A repository as a record names it: a URL as given; for a local path, the checkout's
    `origin` remote where that is a URL, else only the directory's name (a record must name code,
    not a place on the machine that wrote it)."""
    if "://" in source or _SCP_LIKE.match(source):
        return source
    local = Path(path or source)
    try:
        origin = subprocess.run(
            ["git", "-C", str(local), "remote", "get-url", "origin"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        origin = ""
    if "://" in origin or _SCP_LIKE.match(origin):
        return origin
    return f"local directory {Path(source).name}"


def is_url(source: str) -> bool:
    """Whether `source` names a remote (or file://) git repository rather than a local path."""
    return "://" in source or bool(_SCP_LIKE.match(source))


def _is_git_repository(path: Path) -> bool:
    """A non-bare repository (has .git) or a bare one (HEAD, objects/ and refs/ at its top)."""
    if (path / ".git").exists():
        return True
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def check_outside_project(path: Path, what: str) -> None:
    """Refuse a path inside this project: the authors' code must never be placed in it."""
    if _inside(path, PROJECT_ROOT):
        raise VersusError(f"{what} {path} lies inside the project ({PROJECT_ROOT}); use a directory outside it")


def check_source(option: str, source: str) -> None:
    """Fail early, in one line, on a local path that does not exist or lies inside the project."""
    if is_url(source):
        return
    path = Path(source).expanduser()
    if not path.exists():
        raise VersusError(f"{option}: no such repository or directory: {source}")
    if not path.is_dir():
        raise VersusError(f"{option}: not a directory: {source}")
    if not _is_git_repository(path):
        check_outside_project(path, f"{option}: the plain directory")


def _git(*args: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=600)
    except FileNotFoundError as error:
        raise VersusError("git is not installed: it is needed to obtain the authors' code") from error
    except subprocess.CalledProcessError as error:
        detail = (error.stderr or error.stdout or "").strip().splitlines()
        raise VersusError(f"git {' '.join(args)} failed: {detail[-1] if detail else error}") from error
    return done.stdout.strip()


def obtain(option: str, source: str, revision: str, scratch: Path, name: str) -> AuthorsCode:
    """The authors' code from `source`: a git repository is cloned into `scratch/<name>-*` and
    `revision` checked out; a plain directory is used as is (nothing copied into the project)."""
    check_source(option, source)
    if not is_url(source) and not _is_git_repository(Path(source).expanduser()):
        path = Path(source).expanduser().resolve()
        return AuthorsCode(source, path, "unknown (plain directory)", "plain directory")
    check_outside_project(scratch, "the scratch directory")
    scratch.mkdir(parents=True, exist_ok=True)
    destination = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch)) / "repo"
    origin = source if is_url(source) else str(Path(source).expanduser().resolve())
    _git("clone", "--quiet", "--no-checkout", origin, str(destination))
    try:
        commit = _git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}", cwd=destination)
    except VersusError:  # a branch of the source other than its default exists as origin/<name>
        try:
            commit = _git("rev-parse", "--verify", "--quiet", f"origin/{revision}^{{commit}}", cwd=destination)
        except VersusError:
            raise VersusError(f"{option}: no revision {revision!r} in {source}") from None
    _git("checkout", "--quiet", "--detach", commit, cwd=destination)
    return AuthorsCode(source, destination, commit, "git clone")


# Packages the authors' step really runs (no stub can stand in), with the version their
# requirements pin; only BiSHop's einops is not a dependency of this project.
STEP_DEPENDENCIES: dict[str, dict[str, str]] = {"npt": {}, "bishop": {"einops": "einops==0.7.0"}}


def ensure_deps(model: str, scratch: Path, install: bool) -> list[Path]:
    """Import-path entries that make `model`'s step dependencies importable: nothing when this
    Python has them, `<scratch>/deps` after a pip install there when `install` is set; otherwise
    VersusError naming the package and the option."""
    needed = STEP_DEPENDENCIES[model]
    deps = scratch / "deps"
    lacking = [name for name in needed if importlib.util.find_spec(name) is None and not (deps / name).is_dir()]
    if lacking and not install:
        raise VersusError(
            f"the authors' {model} code needs {', '.join(lacking)}, which this Python lacks: pass "
            f"--install-deps to pip-install it into {deps} (outside the project)"
        )
    if lacking:
        check_outside_project(deps, "the dependency directory")
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(deps)]
        try:
            subprocess.run(command + [needed[name] for name in lacking], check=True, timeout=900)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
            raise VersusError(f"pip could not install {', '.join(lacking)} into {deps}: {error}") from error
    return [deps] if deps.is_dir() else []


def run_driver(
    spec: dict[str, Any], workdir: Path, timeout_s: float, module: str = "benchmarks.versus.driver"
) -> dict[str, Any]:
    """One run of the authors' code: `spec` (see benchmarks.versus.driver, or the `module` named)
    is handed to a fresh `python -m <module>` process working in `workdir`; returns its figures."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec_path = workdir / "driver-spec.json"
    result_path = workdir / "driver-figures.json"
    result_path.unlink(missing_ok=True)
    write_json(spec_path, {**spec, "result": str(result_path), "workdir": str(workdir)})
    # leave their checkout untouched; the driver module is found through this repository's root
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": pythonpath(os.environ.get("PYTHONPATH"))}
    command = [sys.executable, "-m", module, str(spec_path)]
    try:
        done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as error:
        raise RuntimeError(f"the authors' {spec['case']} run took longer than {timeout_s:.0f} s") from error
    if done.returncode != 0 or not result_path.is_file():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-40:])
        raise RuntimeError(f"the authors' {spec['case']} run failed (exit {done.returncode}):\n{tail}")
    return json.loads(result_path.read_text(encoding="utf-8"))
