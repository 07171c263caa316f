"""`snakemake --lint` for `make lint`: fails on every lint except the few this workflow keeps on purpose.

    python tests/snakemake_lint.py          # from the repository root; exit 1 on an unexpected lint

Snakemake has no way to silence a lint, so the ones the workflow deliberately keeps are listed
here with the reason; anything else fails. The lints run for the default profile and for `paper`
(whose tables rules cover both papers).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
PROFILES = (None, "paper")

# Lint title (as Snakemake prints it, up to the colon) -> why the workflow keeps it.
ALLOWED = {
    "Specify a conda environment or container for each rule.": (
        "every rule runs `python -m tabrepro` of the interpreter running Snakemake, from the venv that "
        "requirements.lock pins with hashes (`make venv`); there is no per-rule conda env or image to name"
    ),
    "Shell command directly uses variable CLI from outside of the rule": (
        "CLI is that interpreter's path plus params.yaml and the profile; as a rule param its value (a "
        "machine's venv path) would rerun every job elsewhere, and moving it into params would change every "
        "shell command, which reruns every finished job (Snakemake's code trigger)"
    ),
    "Param outdir is a prefix of input or output file but hardcoded": (
        "report_html's --output-dir is the layout's report directory; deriving it from the output would "
        "change the rule's recorded params and rerun the report of every finished run"
    ),
}

_ITEM = re.compile(r"^Lints for (?P<item>.+?)(?: \(line \d+, .*\))?:$")
_TITLE = re.compile(r"^    \* (?P<title>.+):$")


def parse_lints(text: str) -> list[tuple[str, str]]:
    """(rule or snakefile, lint title) for every lint in `snakemake --lint`'s text output."""
    found, item = [], None
    for line in text.splitlines():
        if match := _ITEM.match(line):
            item = match.group("item")
        elif item is not None and (match := _TITLE.match(line)):
            found.append((item, match.group("title")))
    return found


def unexpected(lints: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(item, title) for item, title in lints if title not in ALLOWED]


def run_lint(profile: str | None) -> str:
    args = [str(SNAKEMAKE), "--lint", *(["--config", f"profile={profile}"] if profile else [])]
    run = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600)
    output = run.stdout + run.stderr
    if run.returncode not in (0, 1) or (run.returncode == 1 and "Lints for" not in output):
        raise SystemExit(f"snakemake --lint failed to run (exit {run.returncode}):\n{output[-3000:]}")
    return output


def main() -> int:
    problems = []
    for profile in PROFILES:
        lints = parse_lints(run_lint(profile))
        problems += [(profile or "default", item, title) for item, title in unexpected(lints)]
        print(
            f"snakemake --lint (profile {profile or 'default'}): {len(lints)} lint(s), "
            f"{len(lints) - len(unexpected(lints))} of them kept on purpose (tests/snakemake_lint.py)"
        )
    for profile, item, title in problems:
        print(f"  profile {profile}: {item}: {title}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
