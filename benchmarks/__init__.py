"""Benchmark tooling beside the pipeline: run from the repository root as `python -m benchmarks.X`.

Nothing the workflow runs lives here. These modules time, size and compare the pipeline's code
(step benchmarks, the side-by-side runs against the authors' code, bf16 against fp32, the full-size
stand-ins) and render the committed records of those runs into docs/results/. They import
`tabrepro`; `tabrepro` never imports them, and the installed package does not contain them.
"""
