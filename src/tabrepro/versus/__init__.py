"""Side-by-side speed benchmark: the authors' NPT and BiSHop training steps against ours.

    python -m tabrepro.versus --npt-repo PATH_OR_URL --bishop-repo PATH_OR_URL [--rounds 3]
                              [--threads N] [--cases ...] [--json PATH] [--force]

The authors' code is obtained at run time into a scratch directory outside the project
(`tabrepro.versus.authors`) and driven in its own process (`tabrepro.versus.driver`); this
package holds only the harness. What each side's step contains, and what differs, is in
`tabrepro.versus.cases`; the command line and the output in `tabrepro.versus.cli`.

`python -m tabrepro.versus fidelity` trains both models to the end on the same rows instead and
compares their test scores (`tabrepro.versus.fidelity`, the authors' side in
`tabrepro.versus.fidelity_driver`).

Nothing under tabrepro.npt or tabrepro.bishop imports this package (it is a top-level tool).
Importing the package itself imports nothing (no torch).
"""
