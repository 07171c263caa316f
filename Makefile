# Two commands a user needs: `make run` (the main job) and `make test`.
# Both create .venv from requirements.lock (every package pinned, with hashes) if it is missing
# or older than the lock; `make lock` regenerates the lock from pyproject.toml's direct pins.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LOCK   := requirements.lock
CORES  ?= $(shell nproc)
PROFILE ?= quick
# Extra pip options for installing the lock elsewhere, e.g. where torch's CPU wheel is not on disk:
#   make test PIP_INSTALL_ARGS='--extra-index-url https://download.pytorch.org/whl/cpu'
PIP_INSTALL_ARGS ?=
# pip-tools for `make lock`, in a venv of its own so that it never changes .venv's packages.
# 7.6.x builds PyPI's JSON API address wrongly and then downloads every wheel of every platform
# to hash it; 7.5.3 reads the hashes from the JSON API.
PIP_TOOLS  := pip-tools==7.5.3
LOCK_TOOLS := $(VENV)/lock-tools
# Everything above this line of requirements.lock is ours and kept by `make lock`.
LOCK_MARK  := \# ==== pip-compile output below (make lock) ====

.PHONY: run test lint venv lock dryrun-paper clean-results help repro dvc-pull

help:  ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

# The lock installs with --require-hashes (each file checked against the lock); the project itself
# goes in without dependencies and without build isolation, so that its build backend is the
# locked setuptools and nothing unlocked is downloaded. `pip check` fails when pyproject's pins
# and the installed (locked) versions disagree.
$(STAMP): pyproject.toml $(LOCK)
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (need Python 3.11)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes $(PIP_INSTALL_ARGS) -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $(STAMP)

venv: $(STAMP)  ## create .venv from requirements.lock

# Resolves pyproject.toml (dependencies, the test extra and the build requirements) on this
# machine, keeping the lock's current pins where they still fit (UPGRADE=1: newest versions
# allowed by pyproject). torch must resolve to the local CPU wheel (see requirements.lock's notes).
lock:  ## regenerate requirements.lock from pyproject.toml (UPGRADE=1 to re-resolve every pin)
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (need Python 3.11)"; exit 1; }
	test -x $(LOCK_TOOLS)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_TOOLS) && \
	  $(LOCK_TOOLS)/bin/python -m pip install --quiet $(PIP_TOOLS); }
	grep -q '^$(LOCK_MARK)$$' $(LOCK) || { echo "error: $(LOCK) lacks the line '$(LOCK_MARK)'"; exit 2; }
	sed -n '1,/^$(LOCK_MARK)$$/p' $(LOCK) > $(LOCK).notes
	cp $(LOCK) $(LOCK).new
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_TOOLS)/bin/pip-compile --quiet --generate-hashes \
	  --allow-unsafe --strip-extras --extra test --all-build-deps --no-emit-index-url \
	  --no-emit-find-links $(if $(UPGRADE),--upgrade) --output-file $(LOCK).new pyproject.toml \
	  || { rm -f $(LOCK).new $(LOCK).notes; exit 1; }
	grep -q '^torch==[^ ]*+cpu ' $(LOCK).new || { rm -f $(LOCK).new $(LOCK).notes; \
	  echo "error: torch did not resolve to a CPU build; see $(LOCK)'s notes"; exit 2; }
	cat $(LOCK).notes $(LOCK).new > $(LOCK).tmp && mv $(LOCK).tmp $(LOCK)
	rm -f $(LOCK).new $(LOCK).notes

run: $(STAMP)  ## main job: the selected profile (default quick: breast cancer, all models, 10 folds)
	$(BIN)/snakemake --cores $(CORES) --config profile=$(PROFILE) --printshellcmds -- all

# pytest-xdist runs the test files on one worker per core that `nproc` counts (TEST_WORKERS=0:
# one process, no workers). A file's tests stay together on one worker, so its module fixtures
# (a Slurm cluster, a workflow run) are built once; files with slow tests are handed out first
# (tests/conftest.py), in that order, so the long ones do not start last.
TEST_WORKERS ?= $(CORES)
test: $(STAMP)  ## unit tests plus an end-to-end workflow run on tiny data, then `make lint`
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
	$(MAKE) --no-print-directory lint

# ruff (pyproject's [tool.ruff]: lint rules and formatting) over the Python sources, benchmarks and tests;
# mypy (pyproject's [tool.mypy]) over the package's sources; snakefmt and `snakemake --lint` over the workflow (tests/snakemake_lint.py lists the lints the
# workflow keeps on purpose, with the reason). `ruff format src benchmarks tests` and `snakefmt Snakefile
# workflow/` apply the formatting.
lint: $(STAMP)  ## ruff check + format check, mypy, snakefmt --check, snakemake --lint
	$(BIN)/ruff check src benchmarks tests
	$(BIN)/ruff format --check src benchmarks tests
	$(BIN)/mypy
	$(BIN)/snakefmt --check Snakefile workflow/
	$(BIN)/python tests/snakemake_lint.py

dryrun-paper: $(STAMP)  ## list every job of both papers (no data needed)
	$(BIN)/snakemake -n --quiet rules --config profile=paper -- all

repro: $(STAMP)  ## DVC: reproduce the profile's tables and record them in dvc.lock (docs/dvc.md)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro

dvc-pull: $(STAMP)  ## DVC: fetch data, results, weights and tables from the remote; align Snakemake
	$(BIN)/dvc pull
	$(BIN)/snakemake --cores 1 --touch --forceall --quiet -- all

clean-results:  ## remove results (keeps downloaded data)
	rm -rf results/npt results/bishop results/tables
