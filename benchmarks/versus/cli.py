"""Command line of the side-by-side benchmark: the authors' training steps against ours.

    python -m benchmarks.versus --npt-repo PATH_OR_URL --bishop-repo PATH_OR_URL
        [--npt-rev REV] [--bishop-rev REV] [--cases CASE ...] [--rounds 3] [--threads N]
        [--steps N] [--warmup N] [--scratch DIR] [--keep-scratch] [--install-deps]
        [--max-load 0.5] [--force] [--device cpu|cuda] [--peak-sizes N ...] [--peak-only] [--json PATH]

Example (the copies of the authors' repositories on this project's machines; einops, which
their BiSHop needs and this project does not, is pip-installed into the scratch directory):

    python -m benchmarks.versus --npt-repo /work/.mirror/OATML+non-parametric-transformers/repo \\
        --bishop-repo /work/.mirror/MAGICS-LAB+BiSHop/repo --install-deps --json versus.json

`python -m benchmarks.versus fidelity ...` is the other sub-command: both models trained to the
end on the same rows and their test scores compared (benchmarks.versus.fidelity).

A repository is a local git directory (bare or not) or a URL, cloned into the scratch directory
(a temporary directory outside the project unless --scratch names one) at --*-rev, or a plain
directory used where it is. Cases (benchmarks.versus.cases says what each step contains):
npt_breast_cancer, npt_breast_cancer_code, bishop_default, bishop_code; npt_tiny on request.

Each round runs, per case, the authors' step and then ours, each in a fresh process on the same
number of torch threads (default: the cores this process may use); the table gives the medians
over the rounds, the ratio (ours faster = authors' time / ours), achieved GFLOP/s against the
machine's fp32 matmul peak measured at the same thread count, and for BiSHop samples/s. The
command refuses to time when the 1-minute load average exceeds --max-load x cores (exit 2),
unless --force, which marks the table and the JSON with a warning. The JSON is rewritten after
every round ("rounds_completed"), so a run cut short keeps the rounds it finished. Bad input (a
missing repository, an unknown case, a missing dependency, --device cuda without a GPU) is one
line on stderr and exit status 2.

With --device cuda both sides train on the GPU (benchmarks.versus.cases says how each runs there),
each run takes more steps (a GPU step is milliseconds), and the peak is the GPU's fp32 cuBLAS rate.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.versus import authors, cases, machine
from benchmarks.versus.authors import VersusError, chosen_cases
from benchmarks.versus.cases import CASES, DEFAULT_CASES, Case
from benchmarks.versus.machine import DEFAULT_MAX_LOAD
from tabrepro.errors import InputError
from tabrepro.io import write_json

__all__ = ["build_parser", "main", "format_ratio", "format_table", "format_header", "NPT_UPSTREAM", "BISHOP_UPSTREAM"]

NPT_UPSTREAM = "https://github.com/OATML/non-parametric-transformers"
BISHOP_UPSTREAM = "https://github.com/MAGICS-LAB/BiSHop"
PROG = "benchmarks.versus"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m {PROG}",
        description="Time the authors' NPT and BiSHop training steps against ours, alternating, on this machine.",
        epilog=f"cases: {', '.join(CASES)} (default: {', '.join(DEFAULT_CASES)}); what each step contains: "
        "the docstring of benchmarks.versus.cases",
    )
    parser.add_argument("--npt-repo", default=NPT_UPSTREAM, help="NPT authors' repository: git dir, URL or plain dir")
    parser.add_argument("--bishop-repo", default=BISHOP_UPSTREAM, help="BiSHop authors' repository")
    parser.add_argument("--npt-rev", default="HEAD", help="revision to check out of a git NPT repository")
    parser.add_argument("--bishop-rev", default="HEAD", help="revision to check out of a git BiSHop repository")
    parser.add_argument("--cases", nargs="+", default=None, metavar="CASE", help="cases to run (see below)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating authors/ours rounds (default 3)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per run (default: per case)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up steps per run (default: per case)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads, both sides (default: cores)")
    parser.add_argument("--scratch", type=Path, default=None, help="where their code goes (default: a temp dir)")
    parser.add_argument("--keep-scratch", action="store_true", help="keep the temporary scratch directory")
    parser.add_argument("--install-deps", action="store_true", help="pip-install their missing step deps to scratch")
    parser.add_argument(
        "--max-load",
        type=float,
        default=DEFAULT_MAX_LOAD,
        help="refuse when the 1-minute load average exceeds this many per core (default %(default)s)",
    )
    parser.add_argument("--force", action="store_true", help="time on a busy machine anyway (marked as such)")
    parser.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="where both sides train (default %(default)s)"
    )
    parser.add_argument(
        "--peak-sizes", type=int, nargs="+", default=None, help="matmul peak sizes n (default 2048 4096; GPU 4096 8192)"
    )
    parser.add_argument("--peak-only", action="store_true", help="only the machine and its matmul peak")
    parser.add_argument("--case-timeout", type=float, default=3600.0, help="seconds per authors' run")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here (atomically)")
    return parser


# ------------------------------------------------------------------------------- formatting
def format_ratio(value: float) -> str:
    """'6.42x' (ours that many times faster; below 1: slower)."""
    return "n/a" if value != value or value in (float("inf"), float("-inf")) else f"{value:.2f}x"


def _rate(gflops: float, peak: float | None) -> str:
    return f"{gflops:.1f}" + (f" ({100 * gflops / peak:.0f}%)" if peak else "")


def format_table(summaries: Sequence[dict[str, Any]], peak_gflops: float | None = None) -> list[str]:
    """The comparison table, one row per case (achieved GFLOP/s with their share of the peak, and
    with a peak the bound on the ratio: ours at the peak, `cases.ratio_at_peak`)."""
    header = (
        "case",
        "authors s/step",
        "ours s/step",
        "ours faster",
        "ours at peak",
        "authors GFLOP/s",
        "ours GFLOP/s",
        "authors samples/s",
        "ours samples/s",
    )
    rows = [header]
    for summary in summaries:
        authors, ours = summary["authors"], summary["ours"]
        rows.append(
            (
                summary["case"],
                f"{authors['step_s_median']:.3f}",
                f"{ours['step_s_median']:.3f}",
                format_ratio(summary["ratio"]),
                format_ratio(cases.ratio_at_peak(summary, peak_gflops)) if peak_gflops else "-",
                _rate(authors["gflops_per_s"], peak_gflops),
                _rate(ours["gflops_per_s"], peak_gflops),
                f"{authors['samples_per_s']:.1f}" if "samples_per_s" in authors else "-",
                f"{ours['samples_per_s']:.1f}" if "samples_per_s" in ours else "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for index, row in enumerate(rows):
        cells = [cell.ljust(widths[0]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)]
        lines.append(" | ".join(cells))
        if index == 0:
            lines.append("-+-".join("-" * width for width in widths))
    return lines


def _threads(count: int) -> str:
    return f"{count} thread" + ("" if count == 1 else "s")


def _banner(warning: str) -> list[str]:
    bar = "!" * min(120, len(warning) + 8)
    return [bar, f"!!! {warning} !!!", bar]


def format_header(
    info: dict[str, Any], peak: dict[str, Any] | None, warning: str | None, code: dict[str, dict[str, str]]
) -> list[str]:
    """What was timed where: CPU and ISA level, torch, threads, load, commit, peak, their code."""
    lines = _banner(warning) if warning else []
    load = info.get("load_average_1min")
    lines += [
        f"machine: {info['cpu_model']} | ISA {info['isa_level']} | {info['logical_cores']} logical cores "
        f"({info['available_cores']} available)",
        "libraries held to: "
        + (", ".join(f"{k}={v}" for k, v in (info.get("isa_limits") or {}).items()) or "nothing (full ISA)"),
        f"torch {info['torch']} (CPU capability {info['torch_cpu_capability']}), {_threads(info['threads'])}, "
        f"1-minute load average {'unknown' if load is None else f'{load:.2f}'}, "
        f"tabrepro commit {info['git_commit']}",
    ]
    gpu = info.get("gpu") if info.get("device") == "cuda" else None
    if gpu:
        lines.append(
            f"GPU: {gpu.get('name')} (compute capability {gpu.get('capability')}, {gpu.get('memory_mb')} MiB, "
            f"CUDA {gpu.get('cuda')}, cuDNN {gpu.get('cudnn')}); both sides train on it"
        )
    if peak:
        parts = [
            f"{kernel} " + ", ".join(f"{n}^2 {value:.1f}" for n, value in per_size.items())
            for kernel, per_size in peak["gflops"].items()
        ]
        where = "the GPU" + (" (TF32 on)" if peak.get("allow_tf32") else "") if gpu else _threads(peak["threads"])
        lines.append(f"fp32 matmul peak on {where} (GFLOP/s): {'; '.join(parts)}; peak {peak['peak_gflops']:.1f}")
    for model, described in code.items():
        lines.append(f"authors' {model}: {described['commit']} ({described['kind']} of {described['source']})")
    return lines


# ------------------------------------------------------------------------------- the run
def _check_numbers(args: argparse.Namespace) -> None:
    for name in ("rounds", "steps", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise VersusError(f"--{name} must be at least 1, got {value}")
    if args.warmup is not None and args.warmup < 0:
        raise VersusError(f"--warmup must be at least 0, got {args.warmup}")
    if args.max_load <= 0:
        raise VersusError(f"--max-load must be positive, got {args.max_load}")
    if args.peak_sizes is not None and any(n < 1 for n in args.peak_sizes):
        raise VersusError("--peak-sizes must be positive")


def _print(lines: Sequence[str]) -> None:
    for line in lines:
        print(line, flush=True)


def _run(args: argparse.Namespace) -> int:
    from benchmarks.steps.common import run_in_subprocess  # imports torch: not needed for --help

    chosen = [] if args.peak_only else chosen_cases(args.cases, DEFAULT_CASES, CASES)
    _check_numbers(args)
    sources = {
        "npt": ("--npt-repo", args.npt_repo, args.npt_rev),
        "bishop": ("--bishop-repo", args.bishop_repo, args.bishop_rev),
    }
    models = list(dict.fromkeys(case.model for case in chosen))
    for model in models:
        authors.check_source(sources[model][0], sources[model][1])
    if args.scratch is not None:
        authors.check_outside_project(args.scratch, "--scratch")

    if args.device == "cuda":
        _check_cuda()
    warning = machine.check_load(args.max_load, args.force)
    threads = args.threads or machine.available_cores()
    info = machine.machine_info(threads)
    sizes = args.peak_sizes or ([4096, 8192] if args.device == "cuda" else [2048, 4096])
    peak = run_in_subprocess(machine.matmul_peak, sizes, threads, 3, args.device)
    info["device"] = args.device
    if args.device == "cuda":
        info["gpu"] = peak.get("gpu")
    payload: dict[str, Any] = {
        "tool": PROG,
        "warning": warning,
        "forced": bool(args.force),
        "machine": info,
        "matmul_peak": peak,
        "settings": {
            "rounds": args.rounds,
            "threads": threads,
            "device": args.device,
            "steps": args.steps,
            "warmup": args.warmup,
            "max_load_per_core": args.max_load,
            "cases": [case.name for case in chosen],
        },
        "authors_code": {},
        "cases": [],
    }
    if args.peak_only:
        _print(format_header(info, peak, warning, {}))
        return _finish(payload, args.json)

    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="tabrepro-versus-"))
    temporary = args.scratch is None and not args.keep_scratch
    try:
        code, deps = {}, {}
        for model in models:
            option, source, revision = sources[model]
            code[model] = authors.obtain(option, source, revision, scratch, model)
            deps[model] = [str(path) for path in authors.ensure_deps(model, scratch, args.install_deps)]
        payload["authors_code"] = {model: found.describe() for model, found in code.items()}
        payload["settings"]["scratch"] = scratch.name  # its name only: a record names no local path
        payload["settings"]["scratch_kept"] = not temporary
        _print(format_header(info, peak, warning, payload["authors_code"]))

        def keep_round(summaries: list[dict[str, Any]], completed: int) -> None:
            """After each round: the figures so far into the JSON, so a run cut short (a time
            limit, a lost machine) still leaves a record of the rounds it finished."""
            payload["cases"], payload["rounds_completed"] = summaries, completed
            if args.json is not None:
                write_json(args.json, payload)

        summaries = _rounds(args, chosen, code, deps, threads, scratch, keep_round)
    finally:
        if temporary:
            shutil.rmtree(scratch, ignore_errors=True)
    payload["cases"] = summaries
    end_load = payload["machine"]["load_average_1min_end"] = machine.load_average()
    print()
    _print(format_table(summaries, peak["peak_gflops"]))
    if end_load is not None:  # includes this benchmark's own threads
        print(f"1-minute load average at the end: {end_load:.2f} (includes the benchmark's own {_threads(threads)})")
    for summary in summaries:
        data = summary["authors"].get("data_s_median")
        if summary["model"] == "npt" and data is not None:
            print(
                f"{summary['case']}: the authors' data loading before each step (masks), not in their time: "
                f"{data:.3f} s; ours draws the masks inside its step"
            )
    if not temporary:
        print(f"their code and the runs' files are in {scratch}")
    if warning:
        _print(_banner(warning))
    return _finish(payload, args.json)


def _check_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise VersusError("--device cuda: torch sees no CUDA device here (torch.cuda.is_available() is False)")


def _timing(args: argparse.Namespace, case: Case) -> tuple[int, int]:
    """(timed steps, warm-up steps) of a run: the command line's, else the case's defaults for
    the device."""
    gpu = args.device == "cuda"
    steps = args.steps or (case.gpu_steps if gpu else case.steps)
    warmup = (case.gpu_warmup if gpu else case.warmup) if args.warmup is None else args.warmup
    return steps, warmup


def _rounds(
    args: argparse.Namespace,
    chosen: list[Case],
    code: dict[str, authors.AuthorsCode],
    deps: dict[str, list[str]],
    threads: int,
    scratch: Path,
    after_round: Callable[[list[dict[str, Any]], int], None] | None = None,
) -> list[dict[str, Any]]:
    """Alternate authors / ours per round; cases sharing the authors' settings share their run.
    `after_round(summaries so far, rounds completed)` runs after every round."""
    groups: dict[str, list[Case]] = {}
    for case in chosen:
        groups.setdefault(cases.authors_key(case), []).append(case)
    authors_runs: dict[str, list[dict[str, Any]]] = {case.name: [] for case in chosen}
    our_runs: dict[str, list[dict[str, Any]]] = {case.name: [] for case in chosen}
    for round_index in range(args.rounds):
        tag = f"[round {round_index + 1}/{args.rounds}]"
        for members in groups.values():
            first = members[0]
            steps, warmup = _timing(args, first)
            spec = {
                "case": first.name,
                "model": first.model,
                "repo": str(code[first.model].path),
                "deps": deps[first.model],
                "threads": threads,
                "device": args.device,
                "steps": steps,
                "warmup": warmup,
                "settings": cases.authors_settings(first),
            }
            workdir = scratch / "runs" / f"{first.name}-round{round_index + 1}"
            run = authors.run_driver(spec, workdir, args.case_timeout)
            print(f"{tag} {'/'.join(c.name for c in members)}: authors {run['step_s_median']:.3f} s/step", flush=True)
            for case in members:
                authors_runs[case.name].append(run)
                ours = cases.run_ours(case, *_timing(args, case), threads, args.device)
                our_runs[case.name].append(ours)
                print(f"{tag} {case.name}: ours {ours['step_s_median']:.3f} s/step", flush=True)
        if after_round is not None:
            after_round(
                [cases.summarise(case, authors_runs[case.name], our_runs[case.name]) for case in chosen],
                round_index + 1,
            )
    return [cases.summarise(case, authors_runs[case.name], our_runs[case.name]) for case in chosen]


def _finish(payload: dict[str, Any], path: Path | None) -> int:
    if path is not None:
        write_json(path, payload)
        print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["fidelity"]:  # the sub-command: both models trained to the end, scores compared
        from benchmarks.versus import fidelity

        return fidelity.main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except (InputError, OSError) as error:  # bad input or an unwritable/missing file: one line
        message = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
