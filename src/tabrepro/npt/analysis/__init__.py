"""NPT's analysis experiments (Kossen et al. 2021, §4 and App. B): does NPT use other
datapoints, and which ones?

* corruption.py  Alg. 1 / Table 2: permute the other rows' attributes, score again
* lookup.py      §4.2 / Table 3 / Fig. 3: the semi-synthetic duplicate lookup, k-NN baselines,
                 interventions
* deletion.py    Alg. 2 / §4.4: greedy deletion; kept vs deleted vs random distances, Wilcoxon
* attention.py   Fig. 3b, 4: attention-between-datapoints maps per layer and head
* common.py      a trained NPT of a workflow fold, rebuilt with the table it predicts from
* settings.py    sizes per profile (params.yaml `analysis:`)
* jobs.py        the experiments the profile runs and their result paths (no torch);
* runner.py      one experiment end to end (result.json + figures);
                 `tabrepro analyse` (tabrepro.cli) calls it

Submodules import torch; importing this package does not.
"""
