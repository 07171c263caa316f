"""params.yaml: load, validate (JSON schema, then cross-references) and answer questions about it.

Snakemake reads the same file as its configfile and validates it with the same schema; the
workflow then builds its job list through `Params`, so Snakefile, dvc.yaml and the CLI can never
disagree about which datasets, models and folds a profile means.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tabrepro.data.registry import load_registry
from tabrepro.errors import InputError
from tabrepro.evaluation.metrics import HIGHER_IS_BETTER
from tabrepro.layout import RunLayout
from tabrepro.models.hyperparameters import check_params
from tabrepro.models.registry import MODEL_NAMES, get_model_class
from tabrepro.tasks import task_family

SCHEMA_PATH = Path(__file__).resolve().parent / "data" / "params.schema.yaml"  # package data
# libyaml's safe loader where PyYAML was built with it (the wheels are): the same documents, several
# times faster, which every Snakemake start and CLI call pays on params.yaml and the schema.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
DEFAULT_PARAMS_FILE = Path("params.yaml")


class StrictYAMLLoader(YAML_LOADER):  # type: ignore[misc,valid-type]
    """YAML_LOADER refusing a mapping that names a key twice: plain YAML keeps the last value and
    silently drops the first (`seed: 0` ... `seed: 7`)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the constructor below says so
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load_strict_yaml(text: str) -> Any:
    """YAML text as data, refusing duplicate keys (StrictYAMLLoader)."""
    return yaml.load(text, Loader=StrictYAMLLoader)


DATA_DIR_ENV = "TABREPRO_DATA_DIR"
RESULTS_DIR_ENV = "TABREPRO_RESULTS_DIR"  # e.g. a committed run record (tabrepro.reporting.records)
MIRROR_ENV = "TABREPRO_DATA_MIRROR"
# What the schema's `name` pattern allows; names become parts of paths and shell commands.
NAME_RULE = "letters, digits, '_', '.' and '-', starting with a letter or digit, without '..'"


class ParamsError(InputError, ValueError):
    """A malformed or inconsistent params.yaml; the message names the offending key or value."""


@dataclass(frozen=True, order=True)
class Job:
    """One unit of work: one model tuned and tested on one fold of one paper's dataset."""

    paper: str
    dataset: str
    model: str
    fold: int

    def names(self) -> tuple[str, str, str, int]:
        """(paper, dataset, model, fold): what the job's seeds are derived from."""
        return (self.paper, self.dataset, self.model, self.fold)


def _key_path(parts: Iterable[Any]) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "<top level>"


def _did_you_mean(value: str, known: Iterable[str]) -> str:
    known = sorted(known)
    close = difflib.get_close_matches(value, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
    return f"{hint} (known: {shown})"


PROFILES_DIR = "profiles"  # experiment profiles, one file each, beside the parameters file


def read_params_file(path: str | Path, *, profile_files: bool = True) -> dict:
    """A parameters file's YAML mapping, unchecked, with (unless `profile_files` is false) the
    profiles of `profiles/NAME.yaml` beside it added under their file names: experiment
    profiles kept apart from the user's, selected the same way. A syntax error names its line
    and column; a profile file whose name params.yaml already uses is refused."""
    raw = _read_yaml_mapping(Path(path))
    folder = Path(path).parent / PROFILES_DIR
    if profile_files and isinstance(raw.get("profiles"), dict) and folder.is_dir():
        for file in sorted(folder.glob("*.yaml")):
            if file.stem in raw["profiles"]:
                raise ParamsError(f"{file}: profile {file.stem!r} is also defined in {path}; keep one")
            raw["profiles"][file.stem] = _read_yaml_mapping(file)
    return raw


def _read_yaml_mapping(path: Path) -> dict:
    if not path.is_file():
        raise ParamsError(f"{path}: no such parameters file")
    try:
        raw = load_strict_yaml(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        # The parser notices a missing bracket or quote lines later; its context says where it began.
        started = getattr(exc, "context_mark", None)
        context = f" ({exc.context} at line {started.line + 1})" if started and exc.context else ""
        raise ParamsError(f"{path}:{where} not valid YAML: {getattr(exc, 'problem', exc)}{context}") from None
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def load_schema() -> dict:
    if not SCHEMA_PATH.is_file():
        raise ParamsError(f"schema not found at {SCHEMA_PATH}; reinstall tabrepro (it ships as package data)")
    return yaml.load(SCHEMA_PATH.read_text(), Loader=YAML_LOADER)


def _non_finite_number(value: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """The key path of the first NaN or infinity in `value`: a JSON schema's bounds let NaN pass
    (every comparison with it is false), and no setting means anything with one."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _non_finite_number(item, (*path, key))
        if found is not None:
            return found
    return None


def validate_schema(raw: dict, source: str = "params.yaml") -> None:
    """Raise ParamsError with one line naming the first offending key (the deepest best match)."""
    non_finite = _non_finite_number(raw)
    if non_finite is not None:
        raise ParamsError(f"{source}: at {_key_path(non_finite)}: a finite number is needed, not NaN or infinity")
    validator = jsonschema.Draft202012Validator(load_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(raw))
    if error is not None:
        # For a oneOf/anyOf failure, the most specific sub-error names the real problem.
        while error.context:
            error = max(error.context, key=lambda e: len(e.absolute_path))
        message = error.message
        if "propertyNames" in error.schema_path:  # the schema's `name` rule, said in words
            message = f"{error.instance!r} is not a usable name ({NAME_RULE})"
        raise ParamsError(f"{source}: at {_key_path(error.absolute_path)}: {message}")


def extends_chain(spaces: dict[str, dict], name: str, source: str = "params.yaml") -> list[str]:
    """A search space's name followed by the spaces it extends, nearest first."""
    chain: list[str] = []
    current: str | None = name
    while current is not None:
        if current in chain:
            raise ParamsError(f"{source}: search_spaces: cycle in 'extends': {' -> '.join(chain + [current])}")
        if current not in spaces:
            raise ParamsError(f"{source}: unknown search space {current!r}" + _did_you_mean(current, spaces))
        chain.append(current)
        current = spaces[current].get("extends")
    return chain


def resolve_extends(spaces: dict[str, dict], name: str, source: str = "params.yaml") -> dict[str, dict]:
    """Flatten a search space's `extends` chain into {model: space}; later definitions win."""
    merged: dict[str, dict] = {}
    for space_name in reversed(extends_chain(spaces, name, source)):
        merged.update({k: v for k, v in spaces[space_name].items() if k != "extends"})
    return merged


class Params:
    """A validated params.yaml with its active profile applied."""

    def __init__(self, raw: dict, source: str = "params.yaml", profile: str | None = None):
        raw = copy.deepcopy(raw)
        if profile is not None:
            raw["profile"] = profile
        validate_schema(raw, source)
        self.raw = raw
        self.source = source
        self._check_references()

    @classmethod
    def from_file(cls, path: str | Path = DEFAULT_PARAMS_FILE, profile: str | None = None) -> Params:
        path = Path(path)
        return cls(read_params_file(path), source=str(path), profile=profile)

    # ----------------------------------------------------------------------------- checks
    def _fail(self, where: str, message: str) -> None:
        raise ParamsError(f"{self.source}: at {where}: {message}")

    def _check_references(self) -> None:

        raw = self.raw
        if raw["profile"] not in raw["profiles"]:
            self._fail(
                "profile", f"unknown profile {raw['profile']!r}" + _did_you_mean(raw["profile"], raw["profiles"])
            )
        for name, proto in raw["protocols"].items():
            if proto["kind"] == "holdout" and abs(proto["train"] + proto["val"] + proto["test"] - 1) > 1e-9:
                self._fail(f"protocols.{name}", "train + val + test must sum to 1")
        for name in raw["search_spaces"]:
            resolve_extends(raw["search_spaces"], name, self.source)
        sources = load_registry()
        for paper, cfg in raw["papers"].items():
            for model in cfg["models"]:
                if model not in MODEL_NAMES:
                    self._fail(f"papers.{paper}.models", f"unknown model {model!r}" + _did_you_mean(model, MODEL_NAMES))
            for model in cfg.get("extensions") or {}:
                if model not in MODEL_NAMES:
                    self._fail(
                        f"papers.{paper}.extensions", f"unknown model {model!r}" + _did_you_mean(model, MODEL_NAMES)
                    )
                if model in self.all_models(paper):
                    self._fail(f"papers.{paper}.extensions", f"{model!r} is one of the paper's own models; keep one")
            for dataset, entry in cfg["datasets"].items():
                where = f"papers.{paper}.datasets.{dataset}"
                if entry["source"] not in sources:
                    self._fail(
                        f"{where}.source",
                        f"unknown dataset {entry['source']!r}" + _did_you_mean(entry["source"], sources),
                    )
                if entry["protocol"] not in raw["protocols"]:
                    self._fail(
                        f"{where}.protocol",
                        f"unknown protocol {entry['protocol']!r}" + _did_you_mean(entry["protocol"], raw["protocols"]),
                    )
                if entry["search_space"] not in raw["search_spaces"]:
                    self._fail(
                        f"{where}.search_space",
                        f"unknown search space {entry['search_space']!r}"
                        + _did_you_mean(entry["search_space"], raw["search_spaces"]),
                    )
            for claim, spec in (cfg.get("claims") or {}).items():
                where = f"papers.{paper}.claims.{claim}"
                labels: set[str] = set()
                for table in [*spec.get("tables", []), *([spec["ranks_table"]] if "ranks_table" in spec else [])]:
                    if table not in cfg["tables"]:
                        self._fail(f"{where}.tables", f"unknown table {table!r}" + _did_you_mean(table, cfg["tables"]))
                    labels |= set((cfg["tables"][table].get("models") or cfg["models"]).values())
                    labels |= self._printed_labels(paper, cfg, table)
                if spec.get("tables"):
                    named = [spec.get("method"), *(m for k in ("over", "ahead", "ties", "beats", "largest")
                                                   for m in spec.get(k, []))]  # fmt: skip
                    for label in filter(None, named):
                        if label not in labels:
                            self._fail(where, f"unknown method {label!r} in its tables" + _did_you_mean(label, labels))
            for table, tcfg in cfg["tables"].items():
                for model in tcfg.get("models", {}):
                    if model not in MODEL_NAMES:
                        self._fail(
                            f"papers.{paper}.tables.{table}.models",
                            f"unknown model {model!r}" + _did_you_mean(model, MODEL_NAMES),
                        )
                metrics = (
                    [tcfg.get("metric")]
                    if tcfg.get("kind", "metric") == "metric"
                    else list(tcfg.get("rank_metrics", {}).values())
                )
                for metric in metrics:
                    if metric not in HIGHER_IS_BETTER:
                        self._fail(
                            f"papers.{paper}.tables.{table}",
                            f"unknown metric {metric!r}" + _did_you_mean(str(metric), HIGHER_IS_BETTER),
                        )
        for profile, pcfg in raw["profiles"].items():
            for paper, overrides in (pcfg.get("dataset_overrides") or {}).items():
                for dataset, override in overrides.items():
                    where = f"profiles.{profile}.dataset_overrides.{paper}.{dataset}"
                    if paper not in raw["papers"]:
                        self._fail(where, f"unknown paper {paper!r}" + _did_you_mean(paper, raw["papers"]))
                    entries = raw["papers"][paper]["datasets"]
                    if dataset not in entries:
                        self._fail(
                            where, f"unknown dataset {dataset!r} for paper {paper!r}" + _did_you_mean(dataset, entries)
                        )
                    if override["source"] not in sources:
                        self._fail(
                            f"{where}.source",
                            f"unknown dataset {override['source']!r}" + _did_you_mean(override["source"], sources),
                        )
                    if sources[override["source"]].task != sources[entries[dataset]["source"]].task:
                        self._fail(
                            f"{where}.source",
                            f"{override['source']!r} is a {sources[override['source']].task} task, "
                            f"{entries[dataset]['source']!r} a {sources[entries[dataset]['source']].task} one",
                        )
            for section in ("model_overrides", "not_run"):
                for model in pcfg.get(section) or {}:
                    if model not in MODEL_NAMES:
                        self._fail(
                            f"profiles.{profile}.{section}",
                            f"unknown model {model!r}" + _did_you_mean(model, MODEL_NAMES),
                        )
            for paper, sel in pcfg["papers"].items():
                where = f"profiles.{profile}.papers.{paper}"
                if paper not in raw["papers"]:
                    self._fail(where, f"unknown paper {paper!r}" + _did_you_mean(paper, raw["papers"]))
                for kind in ("datasets", "models"):
                    if kind == "models":  # an extension only by name, never through "all"
                        known = self.all_models(paper) + list(raw["papers"][paper].get("extensions") or {})
                    else:
                        known = raw["papers"][paper][kind]
                    for i, name in enumerate([] if sel[kind] == "all" else sel[kind]):
                        if name not in known:
                            self._fail(
                                f"{where}.{kind}[{i}]",
                                f"unknown {kind[:-1]} {name!r} for paper {paper!r}" + _did_you_mean(name, known),
                            )
                        if kind == "models" and name in (pcfg.get("not_run") or {}):
                            self._fail(
                                f"{where}.models[{i}]",
                                f"{name!r} is also listed in profiles.{profile}.not_run; keep one",
                            )
        self._check_search_space_entries()
        self._check_batching()
        self._check_hyperparameters(sources)

    def _check_search_space_entries(self) -> None:
        """Every model a profile runs on a dataset has an entry in that dataset's search space
        (else its jobs would be listed, and scheduled, only to fail when they start)."""
        for profile, pcfg in self.raw["profiles"].items():
            for paper, sel in pcfg["papers"].items():
                cfg = self.raw["papers"][paper]
                datasets = list(cfg["datasets"]) if sel["datasets"] == "all" else sel["datasets"]
                models = self.all_models(paper) if sel["models"] == "all" else sel["models"]
                not_run = pcfg.get("not_run") or {}
                for dataset in datasets:
                    space = cfg["datasets"][dataset]["search_space"]
                    entries = resolve_extends(self.raw["search_spaces"], space, self.source)
                    for model in models:
                        runs = model in (cfg.get("extensions") or {}) or self._runs_on(cfg, model, dataset)
                        if runs and model not in entries and model not in not_run:
                            self._fail(
                                f"profiles.{profile}.papers.{paper}",
                                f"runs {model!r} on {dataset!r}, whose search space {space!r} has no entry for it",
                            )

    def _check_batching(self) -> None:
        """`configs_per_job` may name only models that train one job per configuration, and
        `folds_in_one_job` only models that tune inside one job (elsewhere either would be
        silently ignored)."""

        places = {"resources.training": self.raw["resources"]["training"]}
        for profile, pcfg in self.raw["profiles"].items():
            places[f"profiles.{profile}.resources.training"] = (pcfg.get("resources") or {}).get("training") or {}
        for where, training in places.items():
            for model in training.get("configs_per_job") or {}:
                if model not in MODEL_NAMES:
                    self._fail(
                        f"{where}.configs_per_job", f"unknown model {model!r}" + _did_you_mean(model, MODEL_NAMES)
                    )
                if not get_model_class(model).per_config_jobs:
                    self._fail(
                        f"{where}.configs_per_job",
                        f"{model!r} tunes all its configurations inside one `train` job; only models with "
                        "a job per configuration are batched",
                    )
            together = training.get("folds_in_one_job") or []
            for model in [] if together == "all" else together:
                if model not in MODEL_NAMES:
                    self._fail(
                        f"{where}.folds_in_one_job", f"unknown model {model!r}" + _did_you_mean(model, MODEL_NAMES)
                    )
                if get_model_class(model).per_config_jobs:
                    self._fail(
                        f"{where}.folds_in_one_job",
                        f"{model!r} trains one job per configuration (train_batch); only models that tune "
                        "inside one job train their folds together",
                    )

    def _check_hyperparameters(self, sources: dict) -> None:
        """Every search-space entry and profile override against what its model accepts.

        Names, types and ranges come from tabrepro.models.hyperparameters (a manifest read from
        disk, so no library is imported here). A value must suit every task it is used for: the
        tasks of the datasets whose search space resolves to this entry (or, for an override, that
        the profile runs the model on); an entry no dataset uses must suit some task.
        """

        raw = self.raw
        spaces = raw["search_spaces"]
        used: dict[tuple[str, str], set[str]] = {}  # (space, model) -> task families using that entry
        for cfg in raw["papers"].values():
            for entry in cfg["datasets"].values():
                chain = extends_chain(spaces, entry["search_space"], self.source)
                family = task_family(sources[entry["source"]].task)
                for model in {m for name in chain for m in spaces[name] if m != "extends"}:
                    owner = next(name for name in chain if model in spaces[name])
                    used.setdefault((owner, model), set()).add(family)

        def check(where: str, model: str, params: dict, families: set[str] | None) -> None:
            problem = check_params(model, params, families, _did_you_mean)
            if problem is not None:
                path, message = problem
                self._fail(_key_path([where, *path]), message)

        for space_name, space in spaces.items():
            for model, entry in space.items():
                if model == "extends":
                    continue
                where = f"search_spaces.{space_name}.{model}"
                if model not in MODEL_NAMES:
                    self._fail(where, f"unknown model {model!r}" + _did_you_mean(model, MODEL_NAMES))
                families = used.get((space_name, model))
                check(f"{where}.params", model, entry.get("params") or {}, families)
                for variant, overrides in (entry.get("variants") or {}).items():
                    check(f"{where}.variants.{variant}", model, overrides or {}, families)
        for profile, pcfg in raw["profiles"].items():
            for model, override in (pcfg.get("model_overrides") or {}).items():
                families = self._override_families(profile, model, sources)
                check(
                    f"profiles.{profile}.model_overrides.{model}.params", model, override.get("params") or {}, families
                )

    def _override_families(self, profile: str, model: str, sources: dict) -> set[str]:
        """Task families of the datasets on which a profile runs a model (empty when none)."""
        found: set[str] = set()
        for paper, sel in self.raw["profiles"][profile]["papers"].items():
            cfg = self.raw["papers"][paper]
            models = self.all_models(paper) if sel["models"] == "all" else sel["models"]
            datasets = list(cfg["datasets"]) if sel["datasets"] == "all" else sel["datasets"]
            if model in models:
                found.update(task_family(sources[cfg["datasets"][d]["source"]].task) for d in datasets)
        return found

    # ----------------------------------------------------------------------------- accessors
    @property
    def profile_name(self) -> str:
        return self.raw["profile"]

    @property
    def profile(self) -> dict:
        return self.raw["profiles"][self.profile_name]

    def _printed_labels(self, paper: str, cfg: Mapping[str, Any], table: str) -> set[str]:
        """The method labels the paper's reference numbers print for one of its tables."""
        from tabrepro.reference import reference_methods, reference_table_id  # deferred: loads pandas

        tcfg = cfg["tables"][table]
        metric = tcfg.get("metric")
        if metric is None:
            return set()
        source = str(Path(self.source).parent / cfg["reference"]) if "reference" in cfg else None
        return set(reference_methods(paper, reference_table_id(table, tcfg), metric, source=source))

    @property
    def seed(self) -> int:
        return self.raw["seed"]

    @property
    def papers(self) -> list[str]:
        return list(self.raw["papers"])

    def paper(self, paper: str) -> dict:
        """The paper's entry; its `models` (methods and their labels) gain the extensions the active
        profile selects, so that tables, scorecard and report show them as rows of their own, and
        the files it names (its own `reference` CSV, `implementation_checks`) become paths from the
        working directory."""
        if paper not in self.raw["papers"]:
            raise ParamsError(f"{self.source}: unknown paper {paper!r}" + _did_you_mean(paper, self.raw["papers"]))
        cfg = self.raw["papers"][paper]
        here = Path(self.source).parent
        if "reference" in cfg:  # the paper's own reference CSV, named relative to params.yaml
            cfg = {**cfg, "reference": str(here / cfg["reference"])}
        if "implementation_checks" in cfg:  # records of ours against the authors' code, likewise
            checks = {model: str(here / path) for model, path in cfg["implementation_checks"].items()}
            cfg = {**cfg, "implementation_checks": checks}
        extensions = cfg.get("extensions") or {}
        selected = self.profile["papers"].get(paper, {}).get("models", [])
        chosen = {} if selected == "all" else {m: extensions[m] for m in selected if m in extensions}
        return {**cfg, "models": {**cfg["models"], **chosen}} if chosen else cfg

    def dataset_entry(self, paper: str, dataset: str) -> dict:
        """The paper's entry for a dataset, with the active profile's substitute source if any."""
        datasets = self.paper(paper)["datasets"]
        if dataset not in datasets:
            raise ParamsError(
                f"{self.source}: unknown dataset {dataset!r} for paper {paper!r}" + _did_you_mean(dataset, datasets)
            )
        override = self._dataset_override(paper, dataset)
        return {**datasets[dataset], "source": override["source"]} if override else datasets[dataset]

    def _dataset_override(self, paper: str, dataset: str) -> dict | None:
        return ((self.profile.get("dataset_overrides") or {}).get(paper) or {}).get(dataset)

    def substitute_note(self, paper: str, dataset: str) -> str | None:
        """Why the active profile runs another source for this dataset, or None."""
        override = self._dataset_override(paper, dataset)
        if override is None:
            return None
        original = self.paper(paper)["datasets"][dataset]["source"]
        return f"substitute data: {override['source']} instead of {original} ({override['reason']})"

    def _selected(self, paper: str, kind: str) -> list[str]:
        sel = self.profile["papers"].get(paper, {kind: []})[kind]
        known = self.all_models(paper) if kind == "models" else list(self.paper(paper)[kind])
        chosen = known if sel == "all" else list(sel)
        if kind == "models":
            chosen = [m for m in chosen if self.not_run_reason(m) is None]
        return chosen

    def not_run_reason(self, model: str) -> str | None:
        """Why the active profile leaves a model out (its `not_run` entry), or None."""
        return (self.profile.get("not_run") or {}).get(model)

    def not_run_models(self, paper: str) -> dict[str, str]:
        """The paper's models that the active profile leaves out, with the reason for each."""
        return {m: r for m in self.all_models(paper) if (r := self.not_run_reason(m)) is not None}

    def budget_note(self, paper: str, dataset: str, model: str) -> str | None:
        """How the active profile's budget departs from the paper's for this cell, or None.

        A capped search (fewer configurations than the paper's) or parameters forced by the
        profile's `model_overrides` make the cell a different experiment; the override's `reason`
        says why, and the scorecard shows it.
        """
        override = self._model_override(model)
        space_name = self.dataset_entry(paper, dataset)["search_space"]
        spaces = resolve_extends(self.raw["search_spaces"], space_name, self.source)
        if model not in spaces:
            return None
        paper_space = spaces[model]
        wanted = paper_space["n_configs"]
        if "variants" in paper_space:
            wanted = min(wanted, len(paper_space["variants"]))
        ran = self.n_configs(paper, dataset, model)
        parts = []
        if ran < wanted:
            parts.append(f"{ran} of the paper's {wanted} configurations")
        if override.get("params"):
            parts.append("fixed " + ", ".join(f"{k}={v}" for k, v in override["params"].items()))
        if not parts:
            return None
        reason = override.get("reason")
        return "budget capped: " + "; ".join(parts) + (f" ({reason})" if reason else "")

    def all_models(self, paper: str) -> list[str]:
        """The paper's methods, then models that only its ablation tables list (e.g. BiSHop's); not
        its extensions (a profile selects those by name)."""
        cfg = self.raw["papers"][paper]
        models = list(cfg["models"])
        for table in cfg["tables"].values():
            models.extend(m for m in table.get("models", {}) if m not in models)
        return models

    def runs_on(self, paper: str, model: str, dataset: str) -> bool:
        """Main methods run on every dataset; an ablation-only model on its tables' group only."""
        return self._runs_on(self.paper(paper), model, dataset)

    @staticmethod
    def _runs_on(cfg: dict, model: str, dataset: str) -> bool:
        if model in cfg["models"]:
            return True
        group = cfg["datasets"][dataset].get("group")
        return any(model in t.get("models", {}) and t.get("group") in (None, group) for t in cfg["tables"].values())

    def selected_datasets(self, paper: str) -> list[str]:
        return self._selected(paper, "datasets")

    def selected_models(self, paper: str) -> list[str]:
        return self._selected(paper, "models")

    def source_of(self, paper: str, dataset: str) -> str:
        return self.dataset_entry(paper, dataset)["source"]

    def protocol(self, paper: str, dataset: str) -> dict:
        return self.raw["protocols"][self.dataset_entry(paper, dataset)["protocol"]]

    def repeats(self, paper: str, dataset: str, model: str | None = None) -> int:
        """Seeds the selected configuration is trained with (the test metric is their mean): the
        protocol's `repeats`, or more where a table of `model`'s asks for more `runs` (Table 4.3's
        10 against the protocol's 3)."""
        runs = int(self.protocol(paper, dataset).get("repeats", 1))
        if model is not None:
            tables = self.raw["papers"][paper].get("tables") or {}
            runs = max(
                [runs] + [int(t["runs"]) for t in tables.values() if "runs" in t and model in (t.get("models") or {})]
            )
        return runs

    def n_folds(self, paper: str, dataset: str) -> int:
        proto = self.protocol(paper, dataset)
        return proto["n_folds"] if proto["kind"] == "kfold" else 1

    def folds(self, paper: str, dataset: str) -> list[int]:
        n = self.n_folds(paper, dataset)
        wanted = self.profile["folds"]
        return list(range(n)) if wanted == "all" else [k for k in wanted if k < n]

    def search_space(self, paper: str, dataset: str, model: str) -> dict:
        """The model's search space for this dataset, `extends` resolved."""
        name = self.dataset_entry(paper, dataset)["search_space"]
        spaces = resolve_extends(self.raw["search_spaces"], name, self.source)
        if model not in spaces:
            raise ParamsError(f"{self.source}: search space {name!r} has no entry for model {model!r}")
        space = dict(spaces[model])
        forced = self._model_override(model).get("params")
        if forced:
            space["forced"] = dict(forced)
        return space

    def _model_override(self, model: str) -> dict:
        """The active profile's `model_overrides` entry for a model ({} when there is none)."""
        return (self.profile.get("model_overrides") or {}).get(model) or {}

    def n_configs(self, paper: str, dataset: str, model: str) -> int:
        """The paper's configuration count, capped by the profile (per model, then overall)."""
        space = self.search_space(paper, dataset, model)
        wanted = space["n_configs"]
        if "variants" in space:
            wanted = min(wanted, len(space["variants"]))
        override = self._model_override(model)
        cap = override["max_configs"] if "max_configs" in override else self.profile["max_configs"]
        return wanted if cap is None else min(wanted, cap)

    def split_digest(self, paper: str, dataset: str) -> str:
        """Hash of what a dataset's splits depend on: a change rewrites them (and reruns its jobs)."""
        relevant = {
            "seed": self.seed,
            "dataset": self.dataset_entry(paper, dataset),
            "protocol": self.protocol(paper, dataset),
        }
        return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]

    def job_digest(self, job: Job) -> str:
        """Hash of every parameter a job's result depends on: a change reruns exactly that job."""
        relevant = {
            "seed": self.seed,
            "dataset": self.dataset_entry(job.paper, job.dataset),
            "protocol": self.protocol(job.paper, job.dataset),
            "space": self.search_space(job.paper, job.dataset, job.model),
            "n_configs": self.n_configs(job.paper, job.dataset, job.model),
        }
        selection = self.raw["papers"][job.paper].get("selection_metric")
        if selection:  # only where set, so that the other papers' digests stay as they were
            relevant["selection_metric"] = selection
        return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]

    def jobs(self, papers: Iterable[str] | None = None) -> list[Job]:
        """Every job of the active profile, in a stable order."""
        out: list[Job] = []
        for paper in papers or self.papers:
            for dataset in self.selected_datasets(paper):
                for model in self.selected_models(paper):
                    if self.runs_on(paper, model, dataset):
                        out.extend(Job(paper, dataset, model, k) for k in self.folds(paper, dataset))
        return out

    # ----------------------------------------------------------------------------- paths
    @cached_property
    def data_dir(self) -> Path:
        return Path(os.environ.get(DATA_DIR_ENV) or self.raw["paths"]["data"])

    @property
    def results_dir(self) -> Path:
        return Path(os.environ.get(RESULTS_DIR_ENV) or self.raw["paths"]["results"])

    @property
    def logs_dir(self) -> Path:
        """The workflow's logs: `logs/` beside params.yaml (where Snakemake runs)."""
        return Path(self.source).parent / "logs"

    @property
    def layout(self) -> RunLayout:
        """Every path of a run, as Snakemake patterns or filled in (tabrepro.layout)."""
        return RunLayout(self.data_dir, self.results_dir, self.logs_dir)

    @property
    def mirror(self) -> str | None:
        return os.environ.get(MIRROR_ENV) or self.raw["fetch"]["mirror"]

    # Shorthands for the directories most callers want, filled from the layout's patterns.
    def raw_dir(self) -> Path:
        return self.layout.raw_dir.path()

    def processed_dir(self, source: str) -> Path:
        return self.layout.processed_dir.path(source=source)

    def split_dir(self, paper: str, dataset: str) -> Path:
        return self.layout.split_dir.path(paper=paper, dataset=dataset)

    def job_dir(self, job: Job) -> Path:
        return self.layout.job_dir.path(job)

    def config_dir(self, job: Job, config: int) -> Path:
        """Where a per-configuration job (e.g. one NPT variant) writes; see models.base."""
        return self.layout.config_dir.path(job, config=config)

    def tables_dir(self, paper: str) -> Path:
        return self.layout.tables_dir.path(paper=paper)
