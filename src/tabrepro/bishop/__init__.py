"""BiSHop (Xu 2024) as a paper: the experiments that go beyond training a model.

* feature_sparsity.py  the feature-sparsity curves (Fig. 4.1 right): retrain on fewer features

The network, its training loop and its place among the models are tabrepro.models.bishop; this
package stands above the pipeline (it retrains a run's jobs), so nothing below it imports it.
"""
