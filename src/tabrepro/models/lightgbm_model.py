"""LightGBM through its scikit-learn wrapper (NPT Table 16 space; BiSHop Table A.7 space).

Determinism: `deterministic=True` with row-wise histograms gives identical models for a fixed
seed and thread count. `subsample` (bagging_fraction) is ignored by LightGBM unless bagging is
switched on with `subsample_freq`; when a space sets subsample < 1 and no subsample_freq we bag
every iteration (subsample_freq=1), which is what a tuned "subsample" is meant to do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabrepro.models.base import EstimatorModel


class LightGBMModel(EstimatorModel):
    name = "lightgbm"

    def _estimator_classes(self) -> tuple[type, type]:
        from lightgbm import LGBMClassifier, LGBMRegressor

        return LGBMClassifier, LGBMRegressor

    def _owned_kwargs(self) -> dict[str, Any]:
        return {
            "random_state": self.seed,
            "n_jobs": self.n_jobs,
            "verbosity": -1,
            "deterministic": True,
            "force_row_wise": True,
        }

    def _translate_params(self, params: dict[str, Any], X_train: np.ndarray) -> dict[str, Any]:
        if float(params.get("subsample", 1.0)) < 1.0:
            params.setdefault("subsample_freq", 1)
        return params
