"""Committed records name code, not places: no file under records/ (nor a page generated from
them, docs/results/) holds an absolute path of the machine that wrote it; the authors' code is
named by repository URL and commit, this project's files by repo-relative paths."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import REPO

# An absolute local path: a root-level home, scratch or work folder, not part of a URL or a word.
LOCAL_PATH = re.compile(r"(?<![\w.:/$~-])/(?:work|root|tmp|home|Users|mnt|scratch)/[^\s\"'`)]*")


def local_paths(files: list[Path]) -> list[str]:
    """`file:line: path` for every absolute local path in these text files."""
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            found += [f"{path.relative_to(REPO)}:{number}: {m.group(0)}" for m in LOCAL_PATH.finditer(line)]
    return found


def _tracked(*folders: str) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z", *folders], cwd=REPO, capture_output=True, check=True).stdout
    return [REPO / name for name in listed.decode().split("\0") if name]


def test_no_committed_record_holds_an_absolute_local_path():
    found = local_paths(_tracked("records", "docs/results"))
    assert not found, "absolute local paths (name a repository URL and commit instead):\n" + "\n".join(found[:20])


def test_the_rule_finds_a_local_path_and_spares_urls_and_relative_paths():
    text = '{"source": "/work/.mirror/x/repo", "url": "https://github.com/o/r/tmp/y", "rel": "data/tmp/z"}'
    assert LOCAL_PATH.findall(text) == ["/work/.mirror/x/repo"]
    assert LOCAL_PATH.findall("--out $OUT/a and $TMPDIR/pytest-of-root/x") == []


def test_writers_record_no_local_path(tmp_path):
    """The authors' code is described by URL (or a directory's name) and commit, a result's split
    file relative to its data directory's parent, whatever absolute paths the run used."""
    from benchmarks.versus.authors import AuthorsCode, public_source
    from tabrepro.data.availability import FetchStatus, read_fetch_status, write_fetch_status
    from tabrepro.io import recorded_path

    plain = tmp_path / "authors-npt"
    plain.mkdir()
    described = AuthorsCode(str(plain), plain / "repo", "unknown (plain directory)", "plain directory").describe()
    assert described["source"] == "local directory authors-npt" and not local_paths_in(described)
    url = "https://github.com/OATML/non-parametric-transformers"
    assert public_source(url, plain) == url
    data = tmp_path / "data"
    assert recorded_path(data / "splits" / "npt" / "fold0.npy", data) == "data/splits/npt/fold0.npy"
    assert recorded_path(Path("data/splits/npt/fold0.npy"), Path("data")) == "data/splits/npt/fold0.npy"
    # a fetch record names its files from the data directory's parent too
    raw = data / "raw"
    write_fetch_status(raw, FetchStatus("spambase", ok=True, files=[str(raw / "spambase" / "spambase.data")]))
    assert read_fetch_status(raw, "spambase").files == ["data/raw/spambase/spambase.data"]


def local_paths_in(value: dict) -> list[str]:
    return [m for v in value.values() for m in LOCAL_PATH.findall(str(v))]
