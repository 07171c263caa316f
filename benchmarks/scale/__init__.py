"""Paper scale: synthetic full-size stand-ins of the large datasets and a benchmark of every stage on them.

`python -m benchmarks.scale.standins` writes the stand-ins, `python -m benchmarks.scale.bench` measures
prepare, split and one small train job per model family on them (wall time and peak memory).
"""
