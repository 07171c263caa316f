"""NPT (Kossen et al., NeurIPS 2021) as a paper: the experiments that go beyond training a model.

* analysis/  the paper's analysis experiments (§4, App. B): does NPT use other datapoints?

The network, its training loop and its place among the models are tabrepro.models.npt; this
package stands above the pipeline (it reads a run's folds and trained jobs), so nothing below it
imports it.
"""
