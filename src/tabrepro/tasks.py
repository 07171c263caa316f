"""What a model is asked to learn, named once for every module (datasets, splits, models, metrics,
tables, search spaces).

* `Task`: a dataset's task, as the registry and the table schema state it and the workflow runs
  it: "binary" and "multiclass" targets are class indices 0..n_classes-1, "regression" targets
  are standardised floats.
* `TaskFamily`: what a network is trained for, and how a search space splits its parameters:
  "classification" (binary and multiclass alike) or "regression".
* `ModelTask`: what the model interface (tabrepro.models) accepts: a `Task`, or scikit-learn's
  "classification" (`LABELS_TASK`: labels of any sortable type, `classes_` learned in fit).

Imports nothing beyond the standard library.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "Task",
    "TASKS",
    "TaskFamily",
    "TASK_FAMILIES",
    "ModelTask",
    "LABELS_TASK",
    "MODEL_TASKS",
    "task_family",
    "is_classification",
]

Task = Literal["binary", "multiclass", "regression"]
TASKS: tuple[Task, ...] = get_args(Task)
TaskFamily = Literal["classification", "regression"]
TASK_FAMILIES: tuple[TaskFamily, ...] = get_args(TaskFamily)
ModelTask = Literal[Task, "classification"]
LABELS_TASK: Literal["classification"] = "classification"
MODEL_TASKS: tuple[ModelTask, ...] = (*TASKS, LABELS_TASK)


def task_family(task: str) -> TaskFamily:
    """The family of `task`: classification for binary, multiclass and scikit-learn's
    "classification", regression for regression.

    Raises ValueError for anything else (callers that report bad input wrap it in their error).
    """
    if task == "regression":
        return "regression"
    if task in ("binary", "multiclass", LABELS_TASK):
        return "classification"
    raise ValueError(f"unknown task {task!r}; expected binary, multiclass or regression")


def is_classification(task: str) -> bool:
    """True for every task whose targets are classes (binary, multiclass, classification)."""
    return task_family(task) == "classification"
