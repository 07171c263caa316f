"""LightGBM through its scikit-learn wrapper (NPT Table 16 space; BiSHop Table A.7 space).

Determinism: `deterministic=True` with row-wise histograms gives identical models for a fixed
seed and thread count. `subsample` (bagging_fraction) is ignored by LightGBM unless bagging is
switched on with `subsample_freq`; when a space sets subsample < 1 and no subsample_freq we bag
every iteration (subsample_freq=1), which is what a tuned "subsample" is meant to do.
"""

from __future__ import annotations

import numpy as np

from tabrepro.models.base import TabularModel


class LightGBMModel(TabularModel):
    name = "lightgbm"

    def _fit(
        self,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray | None,
        y_val: np.ndarray | None,
    ) -> None:
        from lightgbm import LGBMClassifier, LGBMRegressor

        params = dict(self.params)
        if float(params.get("subsample", 1.0)) < 1.0:
            params.setdefault("subsample_freq", 1)
        kwargs = self._estimator_kwargs(
            {
                "random_state": self.seed,
                "n_jobs": self.n_jobs,
                "verbosity": -1,
                "deterministic": True,
                "force_row_wise": True,
            },
            params,
        )
        estimator_class = LGBMClassifier if self.is_classifier else LGBMRegressor
        self._estimator = estimator_class(**kwargs).fit(X_train, y_train)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict_proba(X)

    def _predict_values(self, X: np.ndarray) -> np.ndarray:
        return self._estimator.predict(X)
