"""requirements.lock and pyproject.toml agree, and the lock holds nothing that nothing needs.

pyproject.toml keeps the direct pins; requirements.lock (made by `make lock`) pins every package
with hashes, and `make venv` installs only from it. A pin edited in one file but not the other,
a package left in the lock after its last dependant went, or a torch that is not the CPU build
would each make the environment differ from what the project says: these tests fail on each.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import metadata

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from conftest import REPO

LOCK = REPO / "requirements.lock"
PROJECT = "tabrepro"

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}\b")


@dataclass
class LockEntry:
    """One pinned package of the lock: its version, hashes and pip-compile's `# via` parents."""

    version: str
    hashes: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)


def parse_lock(text: str) -> dict[str, LockEntry]:
    """Pins by canonical name. Raises ValueError on a line that is neither pin, hash nor comment."""
    entries: dict[str, LockEntry] = {}
    current: LockEntry | None = None
    in_via = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if not line[0].isspace() and not line.startswith("#"):
            match = _PIN.match(line)
            if not match:
                raise ValueError(f"requirements.lock line {number}: not a name==version pin: {line!r}")
            name = canonicalize_name(match.group(1))
            if name in entries:
                raise ValueError(f"requirements.lock line {number}: {name} is pinned twice")
            current = entries[name] = LockEntry(match.group(2))
            current.hashes += _HASH.findall(line)
            in_via = False
        elif current is not None and stripped.startswith("--hash="):
            current.hashes += _HASH.findall(stripped)
        elif current is not None and line[0].isspace() and stripped.startswith("# via"):
            rest = stripped.removeprefix("# via").strip()
            current.via += [rest] if rest else []
            in_via = not rest
        elif current is not None and in_via and line[0].isspace() and stripped.startswith("#   "):
            current.via.append(stripped.removeprefix("#").strip())
        else:
            in_via = False
    return entries


def direct_requirements(pyproject: dict) -> list[Requirement]:
    """The project's dependencies and its `test` extra (what `make venv` installs)."""
    project = pyproject["project"]
    listed = project["dependencies"] + project.get("optional-dependencies", {}).get("test", [])
    return [Requirement(text) for text in listed]


def build_requirements(pyproject: dict) -> list[Requirement]:
    return [Requirement(text) for text in pyproject["build-system"]["requires"]]


def pin_disagreements(pyproject: dict, lock: dict[str, LockEntry]) -> list[str]:
    """Each way pyproject's pins and the lock differ, one line each (empty: they agree).

    A direct pin must be exact (==) and equal the lock's version; a lock version may add a local
    label (torch's '+cpu') to the public version pyproject names. Build requirements need only be
    satisfied by the lock's pin.
    """
    problems = []
    for req in direct_requirements(pyproject):
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            problems.append(f"pyproject.toml: {req} is not an exact == pin")
            continue
        entry = lock.get(canonicalize_name(req.name))
        if entry is None:
            problems.append(f"pyproject.toml pins {req}, requirements.lock has no {req.name}")
        elif Version(entry.version).public != str(Version(specs[0].version)):
            problems.append(f"pyproject.toml pins {req}, requirements.lock pins {req.name}=={entry.version}")
    for req in build_requirements(pyproject):
        entry = lock.get(canonicalize_name(req.name))
        if entry is None:
            problems.append(f"build requirement {req} is not in requirements.lock")
        elif not req.specifier.contains(entry.version, prereleases=True):
            problems.append(f"build requirement {req} is not met by requirements.lock's {req.name}=={entry.version}")
    return problems


def _via_name(via: str) -> str:
    """'tabrepro (pyproject.toml::build-system.requires)' -> 'tabrepro'; 'dvc' -> 'dvc'."""
    return canonicalize_name(via.split(" ", 1)[0])


def orphans_by_annotation(lock: dict[str, LockEntry]) -> list[str]:
    """Lock entries that no chain of `# via` parents connects to the project (sorted)."""
    needed = {PROJECT}
    changed = True
    while changed:
        changed = False
        for name, entry in lock.items():
            if name not in needed and any(_via_name(parent) in needed for parent in entry.via):
                needed.add(name)
                changed = True
    return sorted(set(lock) - needed)


def installed_closure(roots: list[Requirement]) -> set[str]:
    """Canonical names of every installed distribution the roots need here, through the installed
    packages' own metadata (markers evaluated for this interpreter, extras followed)."""
    expanded: set[tuple[str, str]] = set()  # (distribution, extra or "" for its base requirements)
    pending = [(req, "") for req in roots]  # a requirement and the extra of whoever asked for it
    while pending:
        req, asking_extra = pending.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": asking_extra}):
            continue
        name = canonicalize_name(req.name)
        for extra in ["", *sorted(req.extras)]:
            if (name, extra) in expanded:
                continue
            expanded.add((name, extra))
            try:
                requires = metadata.distribution(name).requires or []
            except metadata.PackageNotFoundError:
                raise AssertionError(f"{name} (needed by the project) is not installed") from None
            pending += [(Requirement(text), extra) for text in requires]
    return {name for name, _ in expanded}


def load_pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def load_lock() -> dict[str, LockEntry]:
    return parse_lock(LOCK.read_text())


# ------------------------------------------------------------------------------------------------
# the checks themselves catch what they claim to (small made-up inputs)

_TOY_PYPROJECT = {
    "build-system": {"requires": ["setuptools>=77"]},
    "project": {"dependencies": ["torch==2.13.0", "dvc==3.67.1"], "optional-dependencies": {"test": ["pytest==9.2.0"]}},
}
_TOY_LOCK = """\
dvc==3.67.1 \\
    --hash=sha256:{h}
    # via tabrepro (pyproject.toml)
funcy==2.1 \\
    --hash=sha256:{h}
    # via dvc
pytest==9.2.0 \\
    --hash=sha256:{h}
    # via tabrepro (pyproject.toml)
torch==2.13.0+cpu \\
    --hash=sha256:{h}
    # via
    #   entmax
    #   tabrepro (pyproject.toml)
setuptools==84.2.1 \\
    --hash=sha256:{h}
    # via tabrepro (pyproject.toml::build-system.requires)
""".format(h="0" * 64)


def test_checks_accept_an_agreeing_toy_lock():
    lock = parse_lock(_TOY_LOCK)
    assert lock["torch"].version == "2.13.0+cpu" and lock["torch"].via == ["entmax", "tabrepro (pyproject.toml)"]
    assert pin_disagreements(_TOY_PYPROJECT, lock) == []
    assert orphans_by_annotation(lock) == []


def test_checks_name_a_changed_pin_a_missing_package_a_loose_pin_and_an_orphan():
    lock = parse_lock(
        _TOY_LOCK.replace("dvc==3.67.1", "dvc==3.60.0").replace("setuptools==84.2.1", "setuptools==70.0")
        + "stray==1.0 \\\n    --hash=sha256:"
        + "1" * 64
        + "\n"
    )
    toy = {
        **_TOY_PYPROJECT,
        "project": {
            **_TOY_PYPROJECT["project"],
            "dependencies": ["torch==2.13.0", "dvc==3.67.1", "entmax==1.3", "numpy>=2"],
        },
    }
    problems = pin_disagreements(toy, lock)
    assert problems == [
        "pyproject.toml pins dvc==3.67.1, requirements.lock pins dvc==3.60.0",
        "pyproject.toml pins entmax==1.3, requirements.lock has no entmax",
        "pyproject.toml: numpy>=2 is not an exact == pin",
        "build requirement setuptools>=77 is not met by requirements.lock's setuptools==70.0",
    ]
    assert orphans_by_annotation(lock) == ["stray"]
    with pytest.raises(ValueError, match="pinned twice"):
        parse_lock(_TOY_LOCK + _TOY_LOCK)
    with pytest.raises(ValueError, match="not a name==version pin"):
        parse_lock("numpy>=2\n")


# ------------------------------------------------------------------------------------------------
# the real files


def test_every_pyproject_pin_is_in_the_lock_with_the_same_version():
    assert pin_disagreements(load_pyproject(), load_lock()) == []


def test_every_lock_entry_has_a_hash_and_a_parent_that_leads_to_the_project():
    lock = load_lock()
    assert len(lock) > 50, "requirements.lock looks truncated"
    assert [name for name, entry in lock.items() if not entry.hashes] == []
    assert orphans_by_annotation(lock) == []


def test_torch_is_the_cpu_build_with_only_its_own_hash():
    lock = load_lock()
    torch = lock["torch"]
    assert Version(torch.version).local == "cpu", torch.version
    assert len(torch.hashes) == 1, "a second torch hash lets pip pick PyPI's CUDA wheel (see the lock's notes)"
    cuda_packages = sorted(n for n in lock if n.startswith(("nvidia-", "triton", "cuda-")))
    assert cuda_packages == []
    assert "torch" in LOCK.read_text().split("# ==== pip-compile output below", 1)[0], "the lock's notes are missing"


def test_the_lock_holds_exactly_what_the_installed_packages_need():
    """Checked against the real metadata of the environment running the tests (installed from the
    lock by `make venv`): nothing the project needs is missing, nothing else is listed."""
    lock = load_lock()
    wrong_version = [
        f"{name}: {metadata.version(name)} installed, {entry.version} locked"
        for name, entry in lock.items()
        if _installed_version(name) not in (Version(entry.version), None)
    ]
    assert wrong_version == [], "this environment was not installed from requirements.lock (make venv)"
    pyproject = load_pyproject()
    needed = installed_closure(direct_requirements(pyproject) + build_requirements(pyproject))
    assert sorted(needed - set(lock)) == [], "needed but not locked"
    assert sorted(set(lock) - needed) == [], "locked but needed by nothing"


def _installed_version(name: str) -> Version | None:
    try:
        return Version(metadata.version(name))
    except metadata.PackageNotFoundError:
        return None


def test_environment_yml_installs_python_311_and_the_lock():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    pip_sections = [d["pip"] for d in deps if isinstance(d, dict) and "pip" in d]
    assert pip_sections == [["-r requirements.lock"]]
