"""Side-by-side speed benchmark: the authors' NPT and BiSHop training steps against ours.

    python -m benchmarks.versus --npt-repo PATH_OR_URL --bishop-repo PATH_OR_URL [--rounds 3]
                              [--threads N] [--cases ...] [--json PATH] [--force]

The authors' code is obtained at run time into a scratch directory outside the project
(`benchmarks.versus.authors`) and driven in its own process (`benchmarks.versus.driver`); this
package holds only the harness. What each side's step contains, and what differs, is in
`benchmarks.versus.cases`; the command line and the output in `benchmarks.versus.cli`.

`python -m benchmarks.versus fidelity` trains both models to the end on the same rows instead and
compares their test scores (`benchmarks.versus.fidelity`, the authors' side in
`benchmarks.versus.fidelity_driver`).

Nothing under tabrepro.models.npt or tabrepro.models.bishop imports this package (it is a top-level tool).
Importing the package itself imports nothing (no torch).
"""
