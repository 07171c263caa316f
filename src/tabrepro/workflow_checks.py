"""The cross-checks that loading the workflow runs on params.yaml beyond `Params` itself (the
analysis and feature-sparsity settings, the jobs they plan, the fold groups and resource policy),
in one place, so that `tabrepro validate` refuses every file Snakemake would stop on."""

from __future__ import annotations

from typing import Any

from tabrepro.bishop.feature_sparsity import plan_jobs, sparsity_settings
from tabrepro.npt.analysis.jobs import active_settings, plan_fold_jobs
from tabrepro.resource_policy import fold_groups, policy


def check_workflow_settings(params: Any) -> None:
    """Raise the InputError (one line naming the key) that the workflow's load would raise on
    `params` (a tabrepro.config.Params); workflow/rules/common.smk runs the same calls."""

    resource_policy = policy(params)
    fold_groups(params, resource_policy)
    analysis = active_settings(params)
    if analysis is not None:
        plan_fold_jobs(params, analysis)
    sparsity = sparsity_settings(params)
    fold_groups(params, resource_policy, plan_jobs(params, sparsity))
