"""Fidelity: the authors' model and ours trained to the end on the same rows, scored alike.

    python -m benchmarks.versus fidelity --npt-repo PATH_OR_URL [--cases CASE ...] [--steps N]
        [--seeds N] [--threads 1] [--record-dir records/fidelity] [--scratch DIR] [--params FILE]
    python -m benchmarks.versus fidelity --cases bishop_qsar --bishop-repo PATH_OR_URL [--install-deps]
    python -m benchmarks.versus fidelity --report-only [--check]     the report from the records

A speed ratio says nothing about whether two implementations are the same model; this does.
Per case and seed, both sides train on the same train/validation/test rows with the same
configuration (in each side's option names), for the same number of steps, each keeping the
weights its own code selects on validation, and both are scored on the same test rows by our
metric code (tabrepro.evaluation.metrics). The per-seed scores of the two sides are then
compared by the scorecard engine (tabrepro.reporting.verdicts, margins from params.yaml
`verdicts.margins`): Δ = ours − authors with its CI and the equivalence verdict.

Cases
    npt_breast_cancer: scikit-learn's copy of UCI WDBC (569 rows, 30 continuous features,
        binary target), our 10 folds of the `npt_cv10` protocol (the seed derived as
        `tabrepro split` derives it), each fold's features standardised with its training
        rows' mean and SD for both sides. NPT-Small as the authors' breast-cancer script and
        params.yaml (search_spaces.npt_small_breast_cancer, variant vanilla) set it: e = 32,
        8 layers, 8 heads, LR 5e-4, LAMB + Lookahead, flat-then-cosine (50 % flat), p_feature
        0.15, every training target masked, full batch; `--steps` steps (default 200, both LR
        schedules compressed to it). Seed = fold on both sides. Ours: NPTTrainer with our
        defaults (validation every 5 epochs, best validation loss kept). Theirs
        (benchmarks.versus.fidelity_driver): their Trainer.train_and_eval with validation every
        epoch and their best-model cache; their split code never runs (the fold's rows are
        handed to their batch dataset), so their overlapping-fold defect does not enter.
    bishop_qsar: QSAR biodegradation (1,055 rows, 41 numerical features, binary target) on the
        bishop protocol's one 70/20/10 split (`tabrepro split bishop qsar` first), the same rows
        for every seed. BiSHop at the thesis defaults (§4.1) with the options that follow the
        authors' code, batch 32, `--steps` epochs (default 10) on both sides, 5 seeds; see
        benchmarks.versus.fidelity_bishop. Theirs (benchmarks.versus.fidelity_bishop_driver):
        their Exp_BiSHop.train with the rows handed to it as their loaders, so their split
        (and its per-dataset seed) never runs. Their einops, if this Python lacks it, is
        pip-installed into the scratch directory with --install-deps.

Record: one JSON per case under --record-dir, rewritten atomically after every (side, seed),
so an interrupted run resumes where it stopped; a record made with other settings or another
commit of their code is refused (one line, exit 2) instead of mixed with. The report beside the
records (README.md) is rendered from them after every write.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.versus import authors, machine
from benchmarks.versus.authors import VersusError, chosen_cases
from benchmarks.versus.driver import npt_shared_settings
from benchmarks.versus.problem import Fold, Problem
from tabrepro.errors import InputError
from tabrepro.io import write_json

__all__ = [
    "FidelityCase",
    "CASES",
    "METRICS",
    "build_parser",
    "npt_problem",
    "our_npt_config",
    "authors_npt_settings",
    "summarise",
    "main",
]

PROG = "benchmarks.versus fidelity"
NPT_UPSTREAM = "https://github.com/OATML/non-parametric-transformers"
BISHOP_UPSTREAM = "https://github.com/MAGICS-LAB/BiSHop"
METRICS = ("auroc", "accuracy_pct", "nll")  # NPT Tables 10, 8, 9
SIDES = ("authors", "ours")


@dataclass(frozen=True)
class FidelityCase:
    """One comparison: model, data, our config's overrides, default length and seed count."""

    name: str
    model: str
    description: str
    steps: int = 200
    seeds: int = 10
    overrides: dict[str, Any] = field(default_factory=dict)  # our config fields changed (both sides follow)
    dataset: str | None = None  # BiSHop: the dataset whose rows both sides train on
    not_run: str | None = None  # why the case is not run, when it is not
    hidden: bool = False


CASES: dict[str, FidelityCase] = {
    case.name: case
    for case in (
        FidelityCase(
            "npt_breast_cancer",
            "npt",
            "NPT-Small (e=32, LR 5e-4) on breast cancer, our 10 folds, both sides trained to the end; ours at "
            "params.yaml's configuration (the paper's defaults, not the options that follow the authors' code)",
        ),
        FidelityCase(
            "bishop_qsar",
            "bishop",
            "BiSHop at the thesis defaults with the authors' code options on QSAR-biodeg, our split, 5 seeds",
            steps=10,
            seeds=5,
            dataset="qsar",
        ),
        FidelityCase(
            "bishop_tiny",
            "bishop",
            "a seconds-long BiSHop on breast cancer (G 8, L 4, one level, D_model 16), for tests",
            steps=2,
            seeds=2,
            overrides={
                "embed_dim": 8,
                "patch_size": 4,
                "n_levels": 1,
                "d_model": 16,
                "n_heads": 2,
                "ffn_dim": 32,
                "n_decoded": 8,
                "n_pooling": 2,
            },
            dataset="sklearn_breast_cancer",
            hidden=True,
        ),
        FidelityCase(
            "npt_tiny",
            "npt",
            "a seconds-long NPT on breast cancer (e=8, 2 layers, 2 heads), for tests",
            steps=3,
            seeds=2,
            overrides={"embed_dim": 8, "n_layers": 2, "n_heads": 2},
            hidden=True,
        ),
    )
}
DEFAULT_CASES = [name for name, case in CASES.items() if not case.hidden]


# ------------------------------------------------------------------------------- the problem
def npt_problem(params: Any) -> Problem:
    """Breast cancer (scikit-learn's WDBC copy) on our npt_cv10 folds, seeded as `tabrepro split`."""
    from sklearn.datasets import load_breast_cancer

    from tabrepro.seeding import derive_seed
    from tabrepro.splits import class_codes, make_all_splits

    data = load_breast_cancer()
    labels = np.where(data.target == 0, "M", "B")  # the UCI file's diagnosis codes
    protocol = params.protocol("npt", "breast_cancer")
    seed = derive_seed(params.seed, "npt", "breast_cancer", "split")
    splits = make_all_splits(protocol, len(labels), seed=seed, y=labels)
    folds = []
    for split in splits:
        x = np.asarray(data.data, dtype=np.float64)
        mean, sd = x[split.train].mean(axis=0), x[split.train].std(axis=0)
        folds.append(Fold((x - mean) / np.where(sd > 0, sd, 1.0), split.train, split.val, split.test))
    codes = class_codes(labels)
    rule = (
        f"npt_cv10 ({protocol['n_folds']} stratified folds, validation {protocol['val_fraction']} of all rows), "
        f"split seed derive_seed({params.seed}, npt, breast_cancer, split) = {seed}"
    )
    return Problem(np.asarray(codes, dtype=np.int64), 2, folds, rule)


def our_npt_config(params: Any, case: FidelityCase, steps: int, seed: int) -> Any:
    """Our NPTConfig: params.yaml's breast-cancer NPT space, variant vanilla, `steps` long."""
    from tabrepro.models.npt.config import NPTConfig

    space = params.search_space("npt", "breast_cancer", "npt")
    values = {**space["params"], **(space.get("variants") or {}).get("vanilla", {})}
    values.update(case.overrides)
    values.update(max_steps=steps, seed=seed, device="cpu", checkpoint_every_steps=None)
    return NPTConfig(**values)


def authors_npt_settings(config: Any) -> dict[str, Any]:
    """The shared settings in the names benchmarks.versus.driver._npt_argv takes."""
    if config.batch_size is not None or config.lr_schedule != "flat_cosine":
        raise VersusError("the authors' side is driven full batch with the flat-then-cosine schedule only")
    return npt_shared_settings(config)


# ------------------------------------------------------------------------------- the sides
def train_ours_npt(config_dict: dict[str, Any], fold: dict[str, Any], threads: int) -> dict[str, Any]:
    """Our NPTTrainer on one fold (a fresh process): test-row probabilities, best step, steps."""
    import torch

    from tabrepro.features import categorical, continuous
    from tabrepro.models.npt.config import NPTConfig
    from tabrepro.models.npt.masking import TEST, TRAIN, VAL, NPTTable
    from tabrepro.models.npt.trainer import NPTTrainer

    torch.set_num_threads(threads)
    x, y = np.asarray(fold["x"], dtype=np.float32), np.asarray(fold["y"], dtype=np.float32)
    parts = [(fold["train"], TRAIN), (fold["val"], VAL), (fold["test"], TEST)]
    order = np.concatenate([np.asarray(rows, dtype=np.int64) for rows, _ in parts])
    values = np.column_stack([x[order], y[order]])
    values[-len(fold["test"]) :, -1] = np.nan  # test targets unknown, as our estimator builds it
    roles = torch.cat([torch.full((len(rows),), role) for rows, role in parts])
    attributes = [continuous() for _ in range(x.shape[1])] + [categorical(int(fold["n_classes"]), "target")]
    trainer = NPTTrainer(attributes, NPTConfig.from_dict(config_dict))
    start = time.perf_counter()
    result = trainer.fit(NPTTable(attributes, torch.from_numpy(values), roles))
    seconds = time.perf_counter() - start
    logits = trainer.target_outputs()[-len(fold["test"]) :].double()
    return {
        "proba_test": torch.softmax(logits, dim=1).tolist(),
        "best_step": int(result.best_step),
        "steps": int(result.steps),
        "seconds": seconds,
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
    }


def _fold_payload(problem: Problem, seed: int) -> dict[str, Any]:
    fold = problem.folds[seed if len(problem.folds) > 1 else 0]  # NPT: a fold per seed; BiSHop: one split
    return {
        "x": fold.x.tolist(),
        "y": problem.y.tolist(),
        "n_classes": problem.n_classes,
        "train": fold.train.tolist(),
        "val": fold.val.tolist(),
        "test": fold.test.tolist(),
    }


def _run_side(side: str, context: dict[str, Any], seed: int) -> dict[str, Any]:
    """One side's training on fold `seed`, scored on its test rows with our metrics."""
    from benchmarks.steps.common import run_in_subprocess
    from benchmarks.versus import fidelity_bishop
    from tabrepro.evaluation.metrics import compute_metrics

    problem, threads, case = context["problem"], context["threads"], context["case"]
    payload = _fold_payload(problem, seed)
    if case.model == "npt":
        config = our_npt_config(context["params"], case, context["steps"], seed)
        train_ours, authors_settings = train_ours_npt, authors_npt_settings
        driver = "benchmarks.versus.fidelity_driver"
    else:
        config = fidelity_bishop.our_bishop_config(case, context["steps"], seed)
        train_ours, authors_settings = fidelity_bishop.train_ours_bishop, fidelity_bishop.authors_bishop_settings
        driver = "benchmarks.versus.fidelity_bishop_driver"
    if side == "ours":
        raw = run_in_subprocess(train_ours, config.to_dict(), payload, threads)
        best = raw["best_step"]
    else:
        spec = {
            **payload,
            "case": case.name,
            "model": case.model,
            "repo": str(context["code"].path),
            "deps": context["deps"],
            "threads": threads,
            "seed": seed,
            "settings": authors_settings(config),
        }
        workdir = context["scratch"] / "runs" / f"{case.name}-seed{seed}"
        raw = authors.run_driver(spec, workdir, context["timeout"], module=driver)
        best = raw["best_epoch"]  # NPT: full batch, an epoch is a step; BiSHop: an epoch
    y_test = problem.y[payload["test"]]
    proba = np.asarray(raw["proba_test"], dtype=np.float64)
    return {
        "metrics": compute_metrics("binary", y_test, proba=proba),
        "best_step": best,
        "steps": raw["steps"],
        "seconds": round(float(raw["seconds"]), 1),
        "parameters": raw["parameters"],
        "test_rows": len(y_test),
        "p_positive_test": [round(float(p), 6) for p in proba[:, 1]],
    }


# ------------------------------------------------------------------------------- the summary
def _side_figures(values: list[float]) -> dict[str, Any]:
    n = len(values)
    sd = statistics.stdev(values) if n > 1 else None
    return {
        "n": n,
        "values": values,
        "mean": statistics.fmean(values) if n else None,
        "sd": sd,
        "se": sd / math.sqrt(n) if sd is not None else None,
    }


def _paired(ours: list[float], theirs: list[float]) -> dict[str, float | None]:
    """The per-seed differences (same rows on both sides) and scipy's paired t-test of them: a
    tighter view than the verdict's, which treats the sides as independent as the scorecard does."""
    from scipy import stats

    differences = [a - b for a, b in zip(ours, theirs, strict=True)]
    spread = statistics.stdev(differences)
    p_value = float(stats.ttest_rel(ours, theirs).pvalue) if spread > 0 else None
    return {"mean": statistics.fmean(differences), "sd": spread, "p_value": p_value}


def summarise(record: dict[str, Any], rules: Any) -> dict[str, Any]:
    """Per metric: both sides' per-seed scores, mean, SD and SE over the seeds both finished,
    Δ = ours − authors with its CI, and the verdict (tabrepro.reporting.verdicts)."""
    from tabrepro.reporting.verdicts import Side, compare, judge_table

    runs = record["runs"]
    seeds = sorted(set(runs["authors"]) & set(runs["ours"]), key=int)
    metrics: dict[str, Any] = {}
    tests = []
    for metric in METRICS:
        sides = {side: _side_figures([runs[side][s]["metrics"][metric] for s in seeds]) for side in SIDES}
        margin = rules.margin(metric)
        test = None
        if len(seeds) > 1 and margin is not None:
            ours, theirs = (
                Side(sides[s]["mean"], sides[s]["se"], len(seeds) - 1, f"{len(seeds)} seeds")
                for s in ("ours", "authors")
            )
            test = compare(ours, theirs, margin.width(theirs.value), rules.alpha)
        tests.append(test)
        described = None if margin is None or not seeds else margin.describe(sides["authors"]["mean"])
        entry: dict[str, Any] = {**sides, "margin": described}
        if test is not None:
            entry.update(delta=test.delta, delta_se=test.se, ci95=list(test.ci95), ci90=list(test.ci90), df=test.df)
            entry["paired"] = _paired(sides["ours"]["values"], sides["authors"]["values"])
        metrics[metric] = entry
    for metric, judged in zip(METRICS, judge_table(tests, rules.fdr), strict=True):
        metrics[metric]["verdict"] = (
            judged.verdict
            if judged
            else "inconclusive: not tested, Δ has no spread (under two seeds, or equal scores on every seed)"
        )
        metrics[metric]["p_difference_bh"] = judged.p_adjusted if judged else None
        metrics[metric]["p_minimum_effect_bh"] = judged.p_minimum_effect_adjusted if judged else None
    best = {side: [runs[side][s]["best_step"] for s in seeds] for side in SIDES}
    return {
        "seeds_compared": [int(s) for s in seeds],
        "seeds_planned": record["settings"]["seeds"],
        "complete": len(seeds) == record["settings"]["seeds"],
        "metrics": metrics,
        "best_validation_step": {side: {"per_seed": best[side], "median": _median(best[side])} for side in SIDES},
    }


def _median(values: list[Any]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


# ------------------------------------------------------------------------------- the record
def _load_record(path: Path, fresh: dict[str, Any]) -> dict[str, Any]:
    """The record to continue: `fresh` when there is none; the stored one when it was made with
    the same settings and code; VersusError (one line) on a corrupt or mismatched one."""
    if not path.exists():
        return fresh
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        runs = stored["runs"]
        if not all(isinstance(runs[side], dict) for side in SIDES):
            raise TypeError("runs")
    except (ValueError, KeyError, TypeError) as error:
        raise VersusError(f"{path}: not a fidelity record ({type(error).__name__}: {error}); move it away") from None
    for key in ("settings", "authors_commit"):
        if stored.get(key) != fresh[key]:
            raise VersusError(
                f"{path}: made with other {key.replace('_', ' ')} than this run; "
                "move it away or use another --record-dir"
            )
    return stored


def _case_record(case: FidelityCase, settings: dict[str, Any], code: authors.AuthorsCode | None) -> dict[str, Any]:
    return {
        "tool": PROG,
        "case": case.name,
        "model": case.model,
        "description": case.description,
        "settings": settings,
        "authors_commit": None if code is None else code.commit,
        "authors_source": None if code is None else authors.public_source(code.source, code.path),
        "runs": {side: {} for side in SIDES},
        "machines": [],
    }


# ------------------------------------------------------------------------------- the report
REPORT_NAME = "README.md"
_REPORT_HEAD = (
    "# Fidelity: the authors' implementations against ours",
    "",
    "Generated by `python -m benchmarks.versus fidelity` from the JSON records beside it (do not edit by hand;",
    "`--report-only` rewrites it, `--report-only --check` exits 1 when it is stale). Per case: both sides",
    "trained to the end on the same rows, scored on the same test rows by `tabrepro.evaluation.metrics`;",
    "Δ = ours − authors, its 95 % CI and the verdict from `tabrepro.reporting.verdicts` (margins: params.yaml",
    "`verdicts.margins`); the paired column tests the per-seed differences (same rows on both sides).",
)


def _number(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


def _case_section(record: dict[str, Any]) -> list[str]:
    lines = [f"## `{record['case']}`", "", record["description"] + ".", ""]
    if record.get("not_run"):
        return [*lines, record["not_run"] + ".", ""]
    settings, summary = record["settings"], record.get("summary")
    first = record["machines"][0] if record.get("machines") else {}
    lines += [
        f"{settings['steps']} steps, {settings['seeds']} seeds planned ({settings['seed_rule']}), "
        f"{settings['threads']} torch thread(s); folds: {settings['folds']}.",
        "",
        f"Authors' code: {record['authors_source']} at `{record['authors_commit']}`; ours: tabrepro "
        f"`{first.get('git_commit')}`; CPU {first.get('cpu_model')} ({first.get('isa_level')}), "
        f"torch {first.get('torch')}.",
        "",
    ]
    if not summary or not summary["seeds_compared"]:
        return [*lines, "No seed finished on both sides yet.", ""]
    done = len(summary["seeds_compared"])
    if not summary["complete"]:
        lines += [f"**Incomplete: {done} of {summary['seeds_planned']} seeds finished on both sides.**", ""]
    lines += [
        "| metric | authors mean ± SD (SE) | ours mean ± SD (SE) | Δ [95 % CI] | margin | verdict | paired Δ (p) |",
        "|---|---|---|---|---|---|---|",
    ]
    for metric, entry in summary["metrics"].items():
        theirs, ours = entry["authors"], entry["ours"]
        paired = entry.get("paired") or {}
        delta = f"{entry['delta']:+.4g} [{entry['ci95'][0]:+.4g}, {entry['ci95'][1]:+.4g}]" if "delta" in entry else "–"
        lines.append(
            f"| {metric} | {_number(theirs['mean'])} ± {_number(theirs['sd'], 3)} ({_number(theirs['se'], 3)}) "
            f"| {_number(ours['mean'])} ± {_number(ours['sd'], 3)} ({_number(ours['se'], 3)}) | {delta} "
            f"| {(entry['margin'] or '–').replace('|paper|', 'authors mean')} | {entry['verdict']} "
            f"| {_number(paired.get('mean'))} ({_number(paired.get('p_value'), 2)}) |"
        )
    lines += ["", "Per seed (AUROC authors / ours; best validation step authors / ours; seconds authors / ours):", ""]
    runs = record["runs"]
    for seed in summary["seeds_compared"]:
        theirs, ours = runs["authors"][str(seed)], runs["ours"][str(seed)]
        lines.append(
            f"- seed {seed}: {theirs['metrics']['auroc']:.4f} / {ours['metrics']['auroc']:.4f}; "
            f"{theirs['best_step']} / {ours['best_step']}; {theirs['seconds']:.0f} / {ours['seconds']:.0f}"
        )
    return [*lines, ""]


def render_report(directory: Path) -> str:
    """The report of every record in `directory`, cases in name order."""
    sections: list[str] = list(_REPORT_HEAD) + [""]
    for path in sorted(directory.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise VersusError(f"{path}: not a fidelity record ({error})") from None
        sections += _case_section(record)
    return "\n".join(sections).rstrip("\n") + "\n"


def write_report(directory: Path, check: bool = False) -> bool:
    """Rewrite directory/README.md from the records (or, with `check`, only say whether it is current)."""
    from tabrepro.io import atomic_write

    text = render_report(directory)
    target = directory / REPORT_NAME
    current = target.is_file() and target.read_text(encoding="utf-8") == text
    if not check and not current:
        atomic_write(target, text)
    return current


# ------------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m {PROG}",
        description="Train the authors' model and ours to the end on the same rows; compare their test scores.",
        epilog=f"cases: {', '.join(CASES)} (default: {', '.join(DEFAULT_CASES)}); see benchmarks.versus.fidelity",
    )
    parser.add_argument("--npt-repo", default=NPT_UPSTREAM, help="NPT authors' repository: git dir, URL or plain dir")
    parser.add_argument("--npt-rev", default="HEAD", help="revision to check out of a git NPT repository")
    parser.add_argument("--bishop-repo", default=BISHOP_UPSTREAM, help="BiSHop authors' repository")
    parser.add_argument("--bishop-rev", default="HEAD", help="revision to check out of a git BiSHop repository")
    parser.add_argument(
        "--install-deps", action="store_true", help="pip-install their missing deps (einops) to scratch"
    )
    parser.add_argument("--cases", nargs="+", default=None, metavar="CASE")
    parser.add_argument("--steps", type=int, default=None, help="training steps per run (default: per case)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds (NPT: folds 0..N-1; default: per case)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    parser.add_argument("--record-dir", type=Path, default=Path("records/fidelity"))
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--scratch", type=Path, default=None, help="where their code goes (default: a temp dir)")
    parser.add_argument("--case-timeout", type=float, default=4 * 3600.0, help="seconds per authors' run")
    parser.add_argument("--report-only", action="store_true", help="only rewrite README.md from the records")
    parser.add_argument("--check", action="store_true", help="with --report-only: exit 1 when README.md is stale")
    return parser


def _check_numbers(args: argparse.Namespace) -> None:
    for name in ("steps", "seeds", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise VersusError(f"--{name.replace('_', '-')} must be at least 1, got {value}")


def _verdict_line(name: str, summary: dict[str, Any]) -> str:
    parts = []
    for metric, entry in summary["metrics"].items():
        theirs, ours = entry["authors"], entry["ours"]
        if theirs["mean"] is None:
            continue
        spread = f" ± {ours['sd']:.4g}" if ours["sd"] is not None else ""
        delta = (
            f", Δ {entry['delta']:+.4g} [{entry['ci95'][0]:+.4g}, {entry['ci95'][1]:+.4g}]" if "delta" in entry else ""
        )
        parts.append(
            f"{metric} authors {theirs['mean']:.4g}, ours {ours['mean']:.4g}{spread}{delta}: {entry['verdict']}"
        )
    seeds = f"{len(summary['seeds_compared'])}/{summary['seeds_planned']} seeds"
    return f"{name} ({seeds}): " + ("; ".join(parts) or "nothing compared yet")


def _run_case(case: FidelityCase, args: argparse.Namespace, params: Any, scratch: Path) -> dict[str, Any]:
    from tabrepro.reporting.verdicts import VerdictRules

    rules = VerdictRules.from_params(params.raw["verdicts"])
    path = args.record_dir / f"{case.name}.json"
    steps, seeds = args.steps or case.steps, args.seeds or case.seeds
    if case.not_run is not None:
        record = _case_record(case, {"seeds": seeds}, None)
        record["not_run"] = case.not_run
        write_json(path, record)
        write_report(args.record_dir)
        print(f"{case.name}: {case.not_run}", flush=True)
        return record
    deps: list[str] = []
    if case.model == "npt":
        problem = npt_problem(params)
        if seeds > len(problem.folds):
            raise VersusError(f"--seeds {seeds}: the case has {len(problem.folds)} folds")
        code = authors.obtain("--npt-repo", args.npt_repo, args.npt_rev, scratch, "npt")
        config = our_npt_config(params, case, steps, 0)
        theirs = authors_npt_settings(config)
        seed_rule = "seed = fold index on both sides (their --np_seed and --torch_seed, our config.seed)"
    else:
        from benchmarks.versus import fidelity_bishop

        problem = fidelity_bishop.bishop_problem(params, str(case.dataset))
        code = authors.obtain("--bishop-repo", args.bishop_repo, args.bishop_rev, scratch, "bishop")
        deps = [str(path) for path in authors.ensure_deps("bishop", scratch, args.install_deps)]
        config = fidelity_bishop.our_bishop_config(case, steps, 0)
        theirs = fidelity_bishop.authors_bishop_settings(config)
        seed_rule = "seed s on both sides (their process's torch.manual_seed, our config.seed), the same rows"
    settings = {
        "steps": steps,
        "seeds": seeds,
        "threads": args.threads,
        "folds": problem.rule,
        "ours_config": {k: v for k, v in config.to_dict().items() if k != "seed"},
        "authors_settings": theirs,
        "seed_rule": seed_rule,
    }
    settings = json.loads(json.dumps(settings))  # as a stored record reads back (tuples as lists)
    record = _load_record(path, _case_record(case, settings, code))
    record["machines"].append(machine.machine_info(args.threads))
    context = {
        "problem": problem,
        "threads": args.threads,
        "params": params,
        "case": case,
        "steps": steps,
        "code": code,
        "deps": deps,
        "scratch": scratch,
        "timeout": args.case_timeout,
    }
    for seed in range(seeds):
        for side in SIDES:
            if str(seed) in record["runs"][side]:
                continue
            result = _run_side(side, context, seed)
            record["runs"][side][str(seed)] = result
            record["summary"] = summarise(record, rules)
            write_json(path, record)
            write_report(args.record_dir)
            scores = ", ".join(f"{m} {result['metrics'][m]:.4g}" for m in METRICS)
            print(
                f"[{case.name} seed {seed}] {side}: {scores}; best step {result['best_step']}, "
                f"{result['seconds']:.0f} s",
                flush=True,
            )
    record["summary"] = summarise(record, rules)
    write_json(path, record)
    write_report(args.record_dir)
    print(_verdict_line(case.name, record["summary"]), flush=True)
    return record


def _run(args: argparse.Namespace) -> int:
    from tabrepro.config import Params

    if args.report_only:
        current = write_report(args.record_dir, check=args.check)
        print(f"{args.record_dir / REPORT_NAME}: {'current' if current else 'stale' if args.check else 'rewritten'}")
        return 0 if current or not args.check else 1
    chosen = chosen_cases(args.cases, DEFAULT_CASES, CASES)
    _check_numbers(args)
    for model, option, source in (("npt", "--npt-repo", args.npt_repo), ("bishop", "--bishop-repo", args.bishop_repo)):
        if any(case.not_run is None and case.model == model for case in chosen):
            authors.check_source(option, source)
    if args.scratch is not None:
        authors.check_outside_project(args.scratch, "--scratch")
    params = Params.from_file(args.params)
    args.record_dir.mkdir(parents=True, exist_ok=True)
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="tabrepro-fidelity-"))
    try:
        for case in chosen:
            _run_case(case, args, params, scratch)
    finally:
        if args.scratch is None:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except (InputError, OSError) as error:
        message = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
