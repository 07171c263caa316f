"""Judging: every cell of every table of the profile's papers, as drafts (both sides and the
test), then Benjamini–Hochberg within each family (table × own / quoted / capped) and each cell's
verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tabrepro.data.registry import get_source
from tabrepro.models.registry import MODEL_NAMES
from tabrepro.reference import reference_table_id
from tabrepro.reporting.scorecard.card import (
    CAPPED,
    OWN,
    QUOTED,
    UNCOUNTED,
    Scorecard,
    ScorecardError,
    ScoreCell,
    higher_is_better,
)
from tabrepro.reporting.scorecard.context import PaperContext, partial_note
from tabrepro.reporting.scorecard.sides import ours_side, paper_side
from tabrepro.reporting.tables.views import Cell, TableView, build_view, dataset_group, rank_paper_metric
from tabrepro.reporting.verdicts import (
    DIFFERS,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_RUN,
    OURS_ONLY,
    REPRODUCED,
    SHIFTED,
    UNDECIDABLE,
    Judged,
    Side,
    Test,
    VerdictRules,
    compare,
    judge_table,
    runs_to_decide,
)


def rules_of(params: Any) -> VerdictRules:
    """The verdict rules params.yaml declares (`verdicts`)."""
    return VerdictRules.from_params(params.raw["verdicts"])


@dataclass
class _Draft:
    """A cell before its table's multiple-testing step: its fields and, where Δ has a spread, its test."""

    fields: dict[str, Any]
    test: Test | None = None
    ours: Side | None = None
    paper: Side | None = None
    comparable: bool = True


def _labels(paper_cfg: Mapping[str, Any], table_cfg: Mapping[str, Any]) -> dict[str, str]:
    """model -> the label this table prints for it (ablation tables have their own labels)."""
    return dict(table_cfg.get("models") or paper_cfg.get("models", {}))


def _model_of(method: str, labels: Mapping[str, str]) -> str | None:

    by_label = {label: model for model, label in labels.items()}
    if method in by_label:
        return by_label[method]
    return method if method in MODEL_NAMES else None


def _paper_text(cell: Cell) -> str | None:
    if cell.paper is None:
        return None
    spread = cell.paper.spread_text
    kind = f" ({cell.paper.spread_kind.upper()})" if spread and cell.paper.spread_kind else ""
    return cell.paper.value_text if spread is None else f"{cell.paper.value_text} ± {spread}{kind}"


def _base(ctx: PaperContext, key: str, column: str, method: str, model: str | None, cell: Cell) -> dict[str, Any]:
    """The fields every kind of cell shares."""
    value = cell.paper
    margin = ctx.rules.margin(cell.metric)
    return dict(
        paper=ctx.paper,
        table=key,
        reference_table=reference_table_id(key, ctx.cfg["tables"][key]),
        metric=cell.metric,
        column=column,
        method=method,
        model=model,
        ours_mean=cell.ours_mean,
        ours_se=None,
        ours_se_basis=None,
        n=cell.count,
        n_expected=None,
        paper_value=value.value if value else None,
        paper_text=_paper_text(cell),
        paper_se=None,
        paper_se_basis=None,
        paper_origin=value.origin if value else None,
        quoted_from=value.quoted_from if value else None,
        paper_selected_on=value.selected_on if value else None,
        margin=margin.width(value.value) if margin and value else None,
        margin_text=margin.describe(value.value) if margin and value else None,
        delta=None,
        ci_low=None,
        ci_high=None,
        ci90_low=None,
        ci90_high=None,
        p_difference=None,
        p_adjusted=None,
        p_minimum_effect=None,
        p_minimum_effect_adjusted=None,
        margin_needed=None,
        more_runs=None,
        verdict_class=NOT_RUN,
        verdict=NOT_RUN,
        better_or_worse=None,
        count_group=(QUOTED if value.quoted else OWN) if value else UNCOUNTED,
        counted_with=ctx.cfg["tables"][key].get("counted_with"),
        budget=None,
        reason=None,
        notes="",
    )


def _compared(draft: _Draft, ours: Side, paper: Side, metric: str, rules: VerdictRules) -> _Draft:
    """Fill in both sides and, where a margin exists and Δ has a spread, the test."""
    draft.ours, draft.paper = ours, paper
    draft.fields.update(
        ours_se=ours.se, ours_se_basis=ours.basis, paper_se=paper.se, paper_se_basis=paper.basis,
        delta=ours.value - paper.value,
    )  # fmt: skip
    margin = rules.margin(metric)
    if margin is None:
        draft.fields["reason"] = f"no margin declared for {metric!r} (params.yaml verdicts.margins)"
        return draft
    draft.test = compare(ours, paper, margin.width(paper.value), rules.alpha)
    if draft.test is not None:
        t = draft.test
        draft.fields.update(
            ci_low=t.ci95[0], ci_high=t.ci95[1], ci90_low=t.ci90[0], ci90_high=t.ci90[1],
            p_difference=t.p_difference, p_minimum_effect=t.p_minimum_effect,
        )  # fmt: skip
    return draft


def _dataset_cells(ctx: PaperContext, key: str, view: TableView) -> list[_Draft]:
    table_cfg = ctx.cfg["tables"][key]
    labels = _labels(ctx.cfg, table_cfg)
    drafts = []
    for dataset in view.columns:
        expected_labels = [label for model, label in labels.items() if ctx.expects(dataset, model)]
        for method in dict.fromkeys([*view.methods, *expected_labels]):
            cell = view.cells.get((method, dataset)) or Cell(metric=table_cfg["metric"])
            model = _model_of(method, labels)
            expected = model is not None and ctx.expects(dataset, model)
            if cell.paper is None and cell.ours_mean is None and not expected:
                continue
            drafts.append(_dataset_cell(ctx, key, table_cfg, dataset, method, model, cell))
    return drafts


def _dataset_cell(
    ctx: PaperContext, key: str, table_cfg: Mapping[str, Any], dataset: str, method: str, model: str | None, cell: Cell
) -> _Draft:
    draft = _Draft(_base(ctx, key, dataset, method, model, cell))
    notes: list[str] = []
    if cell.paper is not None and cell.paper.quoted:
        notes.append(f"the paper quotes this number from {cell.paper.quoted_from}: another paper's protocol")
    substitute = ctx.params.substitute_note(ctx.paper, dataset)
    if substitute:
        notes.append(substitute)
        draft.comparable = False
    notes += [
        n for n in (ctx.unverified_note(dataset), ctx.stale_note(dataset, model), ctx.implementation_note(model)) if n
    ]
    reason = ctx.not_run_reason(dataset, model)
    expected = model is not None and ctx.expects(dataset, model)
    if cell.paper is not None and cell.paper.selected_on == "test":
        notes.append(ctx.selection_bias_note(dataset, model, cell.metric))
    departures = _departures(ctx, dataset)
    if departures and cell.paper is not None:
        notes.append(departures)
    if expected:
        draft.fields["budget"] = ctx.params.budget_note(ctx.paper, dataset, model)
        draft.fields["n_expected"] = len(ctx.params.folds(ctx.paper, dataset))
        if draft.fields["budget"] and draft.fields["count_group"] == OWN:
            draft.fields["count_group"] = CAPPED
    if cell.ours_mean is None:
        draft.fields["reason"] = reason or f"no fold result has the metric {cell.metric!r}"
        draft.fields["notes"] = "; ".join(notes)
        return draft
    folds = ctx.by_job.get((dataset, model), {}) if model is not None else {}
    if expected and reason is None:
        assert model is not None  # expected only of a model's cell
        runs = ctx.runs(dataset, model)
        partial = partial_note(runs)
        notes += [partial] if partial else []
        if cell.count is not None and cell.count < len(runs.present):
            notes.append(f"the metric is missing in {len(runs.present) - cell.count} of the fold results")
    draft.fields["notes"] = "; ".join(notes)
    bootstrap = ctx.prediction_se(dataset, model, folds)
    paper_value = cell.paper.value if cell.paper is not None else None
    spread = table_cfg.get("spread", "se")
    ours = ours_side(ctx.params, ctx.paper, dataset, model, cell, spread, folds, paper_value, bootstrap)
    if cell.paper is None:
        draft.fields.update(ours_se=ours.se, ours_se_basis=ours.basis)
        return draft
    paper = paper_side(ctx.params, ctx.paper, dataset, table_cfg, cell.paper, ours, folds, bootstrap)
    return _compared(draft, ours, paper, cell.metric, ctx.rules)


def _departures(ctx: PaperContext, dataset: str) -> str | None:
    """Where our protocol for this dataset does not follow the source it describes (params.yaml
    `protocols.<name>.not_followed`), named by each entry's lead words."""
    name = ctx.params.dataset_entry(ctx.paper, dataset)["protocol"]
    points = ctx.params.raw["protocols"][name].get("not_followed") or []
    if not points:
        return None
    leads = "; ".join(str(point).split(":", 1)[0] for point in points)
    where = f"params.yaml protocols.{name}.not_followed"
    return f"our protocol departs from its source in {len(points)} ways ({leads}: {where})"


def _task_of(ctx: PaperContext, dataset: str) -> str:
    return get_source(ctx.params.source_of(ctx.paper, dataset)).task


def _rank_cells(ctx: PaperContext, key: str, view: TableView) -> list[_Draft]:
    """Rank cells are judged only when every paper dataset of the task type has every method."""
    table_cfg = ctx.cfg["tables"][key]
    labels = _labels(ctx.cfg, table_cfg)
    group = table_cfg.get("group")
    drafts = []
    for task, metric in table_cfg["rank_metrics"].items():
        datasets = [
            d
            for d in ctx.cfg["datasets"]
            if _task_of(ctx, d) == task and (group is None or dataset_group(ctx.cfg, d) == str(group))
        ]
        ranked = [m for m in view.methods if view.cells[(m, task)].paper is not None]
        gap = _rank_gap(ctx, task, metric, datasets, ranked)
        for method in view.methods:
            cell = view.cells[(method, task)]
            if cell.paper is None and cell.ours_mean is None:
                continue
            cell = replace(cell, metric=rank_paper_metric(task, table_cfg.get("paper_metrics") or {}))
            draft = _Draft(_base(ctx, key, task, method, _model_of(method, labels), cell))
            draft.fields["n_expected"] = len(datasets)
            if gap is not None or cell.ours_mean is None or cell.paper is None:
                draft.fields["reason"] = gap or ("no results" if cell.ours_mean is None else None)
                drafts.append(draft)
                continue
            ours = Side(cell.ours_mean, cell.ours_spread, (cell.count or 1) - 1, f"{cell.count} datasets")
            paper_se = cell.paper.spread if cell.paper.spread_kind == "se" else None
            # the paper's mean rank is over the same datasets: its SE has as many degrees of freedom
            paper_df = len(datasets) - 1 if len(datasets) > 1 else None
            basis = f"the paper's ± (SE over {len(datasets)} datasets)" if paper_se else "none given"
            paper = Side(cell.paper.value, paper_se, paper_df, basis)
            drafts.append(_compared(draft, ours, paper, cell.metric, ctx.rules))
    return drafts


def _rank_gap(ctx: PaperContext, task: str, metric: str, datasets: list[str], methods: list[str]) -> str | None:
    """Why this task type's ranks cannot be compared with the paper's, or None when they can."""
    if not datasets:
        return f"the paper has no {task} dataset"
    have = set(
        map(tuple, ctx.frame.loc[ctx.frame["metric"] == metric, ["dataset", "method"]].drop_duplicates().to_numpy())
    )
    missing: dict[str, list[str]] = {}
    for dataset in datasets:
        status = ctx.fetch_status(dataset) if dataset in ctx.selected else None
        if dataset not in ctx.selected:
            missing.setdefault("not selected by the profile", []).append(dataset)
        elif status is not None and not status.ok:
            missing.setdefault("data not obtainable", []).append(dataset)
        elif gone := [m for m in methods if (dataset, m) not in have]:
            missing.setdefault("each cell of the dataset tables says why", []).append(
                f"{dataset}: no results for {', '.join(gone)}"
            )
    if not missing:
        return None
    detail = "; ".join(f"{', '.join(items)} ({why})" for why, items in missing.items())
    return (
        f"ranks need results of all {len(methods)} ranked methods on every {task} dataset of "
        f"the paper ({', '.join(datasets)}); missing: {detail}"
    )


def _family(draft: _Draft) -> tuple[str, str, str]:
    """The Benjamini–Hochberg family of a cell: its table and tally group; cells judged on other
    data than the paper's are a family of their own, outside every tally."""
    group = draft.fields["count_group"] if draft.comparable else NOT_COMPARABLE
    return (draft.fields["paper"], draft.fields["table"], group)


def _finalise(drafts: list[_Draft], rules: VerdictRules) -> list[ScoreCell]:
    """Benjamini–Hochberg within each family of the table's tested cells, then each cell's verdict."""
    families = [_family(d) for d in drafts]
    judged = judge_table([d.test for d in drafts], rules.fdr, families)
    cells = []
    for i, (draft, verdict) in enumerate(zip(drafts, judged, strict=True)):
        others = [
            d.test.p_minimum_effect
            for j, d in enumerate(drafts)
            if j != i and d.test is not None and families[j] == families[i]
        ]
        cells.append(ScoreCell(**_verdict(draft, verdict, rules, others)))
    return cells


# verdicts that more runs of ours could still turn into `reproduced` or `differs`
UNDECIDED = (SHIFTED, UNDECIDABLE, INCONCLUSIVE)


def _verdict(draft: _Draft, judged: Judged | None, rules: VerdictRules, family: list[float]) -> dict[str, Any]:
    out = dict(draft.fields)
    notes = [out["notes"]] if out["notes"] else []
    if out["ours_mean"] is None:
        return out
    if out["paper_value"] is None:
        return out | dict(verdict_class=OURS_ONLY, verdict="ours only (the paper reports no value)")
    if draft.ours is None:  # never compared: a rank cell whose datasets are not all there (the reason says)
        return out
    test = draft.test
    if test is None or judged is None:
        missing = "" if out["reason"] else " (" + _no_spread(draft) + ")"
        text = f"{INCONCLUSIVE}{missing}"
        return out | dict(verdict_class=INCONCLUSIVE if draft.comparable else NOT_COMPARABLE, verdict=text)
    verdict_class = judged.verdict
    out.update(p_adjusted=judged.p_adjusted, p_minimum_effect_adjusted=judged.p_minimum_effect_adjusted)
    if not test.decidable:
        out["margin_needed"] = test.floor
    higher = test.delta > 0
    direction = higher_is_better(out["metric"])
    side = "higher" if higher else "lower"
    if verdict_class in (DIFFERS, SHIFTED):
        out["better_or_worse"] = None if direction is None else ("better" if higher == direction else "worse")
    if verdict_class == DIFFERS:
        text = f"differs (ours {side}; the 95 % CI lies wholly outside ±δ)"
    elif verdict_class == SHIFTED:
        text = f"shifted (ours {side}; Δ ≠ 0 but the CI reaches into ±δ)"
    elif verdict_class == UNDECIDABLE:
        text = f"{UNDECIDABLE} (the paper's spread alone needs δ ≥ {test.floor:.3g}; δ is {test.margin:.3g})"
    elif verdict_class == INCONCLUSIVE:
        text = INCONCLUSIVE
    else:
        text = REPRODUCED
    if verdict_class in UNDECIDED and draft.comparable:
        assert draft.ours is not None and draft.paper is not None
        cost = runs_to_decide(test, draft.ours, draft.paper, rules.fdr, family)
        out["more_runs"] = cost.more_runs
        notes.append(cost.text)
    if out["counted_with"]:
        notes.append(f"the same fits as {out['counted_with']} on another scale: counted there, once")
    if not draft.comparable:
        verdict_class, text = NOT_COMPARABLE, f"{NOT_COMPARABLE} (other data; would be: {text})"
    return out | dict(verdict_class=verdict_class, verdict=text, notes="; ".join(notes))


def _no_spread(draft: _Draft) -> str:
    parts = [f"{side}: {s.basis}" for side, s in (("ours", draft.ours), ("paper", draft.paper)) if s and s.se is None]
    return "Δ has no spread: " + "; ".join(parts) if parts else "Δ has no spread"


def build_scorecard(
    params: Any, paper: str | None = None, logs_dir: Path | None = None, *, frozen: bool = False
) -> Scorecard:
    """Judge every cell of the profile's papers (or of `paper` only); `frozen` for a committed run
    record, judged as recorded (see collect_current_results).

    `logs_dir` is where the workflow's logs lie (default: `logs/` beside params.yaml, where
    Snakemake writes them). Raises ScorecardError for an unknown paper or one the profile does
    not select, and ResultsError (tabrepro.reporting.tables) for a stale or malformed metrics.json.
    """
    if logs_dir is None:
        logs_dir = params.logs_dir
    if paper is not None:
        if paper not in params.papers:
            raise ScorecardError(f"unknown paper {paper!r} (params.yaml has {', '.join(params.papers)})")
        if not params.selected_datasets(paper):
            raise ScorecardError(f"profile {params.profile_name!r} selects no dataset of paper {paper!r}")
        papers = [paper]
    else:
        papers = [p for p in params.papers if params.selected_datasets(p)]
    rules = rules_of(params)
    card = Scorecard(profile=params.profile_name, papers=papers, titles={}, rules=rules)
    for name in papers:
        ctx = PaperContext(params, name, Path(logs_dir), rules, frozen)
        for key, table_cfg in ctx.cfg.get("tables", {}).items():
            view = build_view(key, table_cfg, name, ctx.cfg, ctx.frame, set(ctx.selected))
            card.titles[(name, key)] = f"{view.title} ({view.source.removesuffix('.')})"
            is_rank = table_cfg.get("kind", "metric") == "rank"
            drafts = _rank_cells(ctx, key, view) if is_rank else _dataset_cells(ctx, key, view)
            card.cells += _finalise(drafts, rules)
        for dataset in ctx.selected:
            status = ctx.fetch_status(dataset)
            if status is not None and not status.ok:
                card.unobtainable.setdefault(name, {})[dataset] = status.error or "no error recorded"
    return card
