"""Step benchmarks: one training step of NPT or BiSHop timed, counted in FLOPs and sized in memory.

`python -m benchmarks.steps.npt` and `python -m benchmarks.steps.bishop` time a step of our
trainers; `benchmarks.steps.npt_capacity` finds the largest full batch within a memory cap;
`benchmarks.steps.op_times` breaks a CPU step down by aten operation. `benchmarks.steps.common`
holds what they share (the FLOP counter, peak memory, the data).
"""
