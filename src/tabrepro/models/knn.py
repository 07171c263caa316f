"""k-nearest neighbours (scikit-learn), the NPT "k-NN" baseline.

`n_neighbors` is capped at the number of training rows: the medium-data space reaches 1000
neighbours, more than a small fold may hold, and scikit-learn refuses such a query. The effective
value is recorded in `fit_info_`. Nothing is random, so the seed is unused.

Fitting stores the rows; predicting is the cost: a brute-force search of every training row for
each query, hours for HIGGS's 1.8 M validation and test rows against 9.2 M training rows. Given
a work directory (`FitContext.work_dir`; the workflow's in-job searches give one per
configuration) a long prediction is made in pieces of `PIECE_ROWS` rows, each saved as it is done,
so that a job stopped in it (a time limit, a lost node) goes on with the next piece. Each row's
prediction depends only on the fitted rows and on itself, so the pieces are the whole call's.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tabrepro.io import atomic_path
from tabrepro.models.estimator import EstimatorModel
from tabrepro.models.rules import THREADS, Hyperparameters, estimator_library

log = logging.getLogger(__name__)

# Rows per saved piece: a multiple of scikit-learn's neighbour-search chunk (256 queries), so the
# pieces are searched in the same chunks as one call over every row.
PIECE_ROWS = 65_536
PIECES_DIR = "predictions"


class KNNModel(EstimatorModel):
    name = "knn"
    cost_family = "knn"

    @classmethod
    def declared_hyperparameters(cls) -> Hyperparameters:
        return Hyperparameters(library=estimator_library(cls), owned={"n_jobs": THREADS})

    @classmethod
    def _estimator_classes(cls) -> tuple[type, type]:
        from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor  # deferred: loads sklearn

        return KNeighborsClassifier, KNeighborsRegressor

    def _owned_kwargs(self) -> dict[str, Any]:
        return {"n_jobs": self.n_jobs}

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        params["n_neighbors"] = min(int(params.get("n_neighbors", 5)), X_train.shape[0])
        self.fit_info_["n_neighbors"] = params["n_neighbors"]
        return params

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._in_saved_pieces(X, "proba", super()._predict_proba)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._in_saved_pieces(X, "values", super()._predict_values)

    def _in_saved_pieces(self, X: np.ndarray, kind: str, predict: Callable[[np.ndarray], Any]) -> np.ndarray:
        """`predict(X)`, piece by piece through files in the work directory when X is long.

        A piece's file is named by a digest of its rows, so a stopped job's pieces are found again
        for the same rows (the directory is the fitted configuration's) and never for others.
        """
        work_dir = self.context.work_dir
        if work_dir is None or len(X) <= PIECE_ROWS:
            return np.asarray(predict(X))
        directory = Path(work_dir) / PIECES_DIR
        directory.mkdir(parents=True, exist_ok=True)
        n_pieces = -(-len(X) // PIECE_ROWS)
        pieces = []
        for index, start in enumerate(range(0, len(X), PIECE_ROWS), 1):
            rows = np.ascontiguousarray(X[start : start + PIECE_ROWS])
            digest = hashlib.sha256(f"{rows.shape} {rows.dtype} ".encode() + rows.tobytes()).hexdigest()[:24]
            path = directory / f"{kind}-{digest}.npy"
            if path.is_file():
                pieces.append(np.load(path, allow_pickle=False))
                log.info("knn %s: piece %d/%d from an earlier run", kind, index, n_pieces)
                continue
            outputs = np.asarray(predict(rows))
            with atomic_path(path, suffix=".npy") as temp:
                np.save(temp, outputs, allow_pickle=False)
            pieces.append(outputs)
            log.info("knn %s: piece %d/%d (%d rows) done", kind, index, n_pieces, len(rows))
        return np.concatenate(pieces)
