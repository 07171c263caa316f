"""The deep-learning layer that the paper networks (tabrepro.models.npt, tabrepro.models.bishop) and
the model interface (tabrepro.models) share, and none of them owns:

* `config`     the plain-dict round trip of a network's dataclass config (no torch);
* `estimator`  the scikit-learn-style adapter base of NPT's and BiSHop's estimators: the checks
               before training, predictions from outputs (no torch);
* `dropout`    dropout drawing from an explicit, checkpointed generator;
* `kernels`    oneDNN GEMMs and attention with dropout, the CPU fast paths;
* `checkpoint` atomic checkpoint files, and `ResumableTrainer`: the state file, resuming from it
               and selecting the kept weights, shared by both trainers; `SavedPass`, the
               outputs so far of a long prediction pass, so a killed job goes on after them;
* `progress`   progress lines of long prediction passes;
* `session`    device, threads, seeded RNG, determinism, autocast;
* `bench`      FLOP, time and memory measurement for the benchmarks.

Nothing is imported here, so that importing `tabrepro.nn.config` does not import torch.
"""
