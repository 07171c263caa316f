# Two commands a user needs: `make run` (the main job) and `make test`.
# Both create .venv with the pinned dependencies from pyproject.toml if it is missing.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CORES  ?= $(shell nproc)
PROFILE ?= quick

.PHONY: run test venv dryrun-paper clean-results help repro dvc-pull

help:  ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (need Python 3.11)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)  ## create .venv with the pinned dependencies

run: $(STAMP)  ## main job: the selected profile (default quick: breast cancer, all models, 10 folds)
	$(BIN)/snakemake --cores $(CORES) --config profile=$(PROFILE) --printshellcmds all

test: $(STAMP)  ## unit tests plus an end-to-end workflow run on tiny data
	$(BIN)/python -m pytest -q

dryrun-paper: $(STAMP)  ## list every job of both papers (no data needed)
	$(BIN)/snakemake all -n --quiet rules --config profile=paper

repro: $(STAMP)  ## DVC: reproduce the profile's tables and record them in dvc.lock (docs/dvc.md)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro

dvc-pull: $(STAMP)  ## DVC: fetch data, results, weights and tables from the remote; align Snakemake
	$(BIN)/dvc pull
	$(BIN)/snakemake --cores 1 --touch --forceall --quiet -- all

clean-results:  ## remove results (keeps downloaded data)
	rm -rf results/npt results/bishop results/tables
