# Two commands matter: `make lab` (serve the course) and `make test` (run every test).
# Both create the virtual environment in .venv on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CROSSCHECK_STAMP := $(VENV)/.crosscheck-installed
DEV_STAMP := $(VENV)/.dev-installed
NOTEBOOK_DIRS := notebooks solutions exercises
# What nb-clean keeps: stored outputs and execution counts (nbval compares them), notebook metadata
# (metadata.widgets is the explorers' saved state for the reading copy) and cell tags. The same
# options as the nb-clean hook in .pre-commit-config.yaml (tests/test_notebooks_clean.py checks).
NB_CLEAN_OPTIONS := --preserve-cell-outputs --preserve-execution-counts --preserve-notebook-metadata \
	--preserve-cell-metadata-field tags

.PHONY: lab test lint unit verify-exercises notebooks kernels execute clean crosscheck browser site \
	clean-notebooks hooks train train-06 train-lm

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[lab,test]'
	touch $(STAMP)

# Serves the whole course (notebooks/, exercises/, solutions/) and opens the map of the lesson. `jupyter lab`
# takes its landing page from LabApp.default_url (the link it prints, the page the browser opens, where /
# leads), which overrides ServerApp's; tests/browser/test_make_lab.py starts this target and reads the page.
# Started in the background, the server ignores Ctrl+C: `.venv/bin/jupyter server stop 8888` (its port).
LAB_PAGE := /lab/tree/notebooks/00_start_here.ipynb
lab: $(STAMP)
	$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) --ServerApp.root_dir=. \
	    --LabApp.default_url=$(LAB_PAGE)

test: lint unit verify-exercises notebooks kernels

lint: $(STAMP)
	$(BIN)/ruff check lessonlib tests benchmarks notebooks tools

# tests/crosscheck runs in `make crosscheck` (it needs torch and JAX), not here.
unit: $(STAMP)
	$(BIN)/python -m pytest tests --ignore=tests/crosscheck

# exercises/ is generated from solutions/ (`lessonlib exercises build`); fail when it is stale.
verify-exercises: $(STAMP)
	$(BIN)/lessonlib exercises verify

NBVAL := -p no:randomly --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg $(NOTEBOOK_DIRS)
notebooks: $(STAMP)
	$(BIN)/python -m pytest $(NBVAL)

# The same nbval run under other CPUs' BLAS kernels and NumPy SIMD loops (tools/blas_kernels.py),
# with the explorers' readouts saved in the widget state (which nbval does not compare): a stored
# number must print the same on every learner's machine. KERNELS=others (two families other than
# this CPU's own), all (every family this CPU can run; CI), or names: Prescott,Haswell.
KERNELS ?= others
kernels: $(STAMP)
	$(BIN)/python tools/blas_kernels.py --kernels $(KERNELS) -- -q $(NBVAL) tests/test_stored_readouts.py

# Re-measure every claim about torch and JAX on the real libraries (installs the `crosscheck` extra).
# Where the libraries are missing those tests skip; REQUIRE_CROSSCHECK=1 (CI) makes that a failure.
# On Linux the default index's torch wheel is the CUDA build (several GB of CUDA libraries); with
# TORCH_INDEX=https://download.pytorch.org/whl/cpu pip also reads PyTorch's CPU index, whose
# 2.13.0+cpu wheel satisfies the pin and wins over the CUDA one. Empty (the default): pip as configured.
TORCH_INDEX ?=
$(CROSSCHECK_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) \
	    -e '.[lab,test,crosscheck]'
	touch $(CROSSCHECK_STAMP)

crosscheck: $(CROSSCHECK_STAMP)
	$(BIN)/python -m pytest -p no:randomly tests/crosscheck

# Re-execute every committed notebook in place (after changing a notebook or the engine).
execute: $(STAMP)
	$(BIN)/python -m lessonlib.notebook_tools execute $(NOTEBOOK_DIRS)

# Strip editor noise (cell metadata other than tags, execution timings, signatures) from every
# committed notebook, as the pre-commit hook does; outputs stay, so nothing needs re-executing.
clean-notebooks: $(STAMP)
	$(BIN)/nb-clean clean $(NB_CLEAN_OPTIONS) $(NOTEBOOK_DIRS)

# For maintainers: installs pre-commit and nbdime (the `dev` extra), the pre-commit hooks of this
# clone, and nbdime as git's diff and merge driver for notebooks in this clone. nbdime writes its
# commands into .git/config by bare name; they are rewritten to this venv's copies so that
# `git diff` works without activating the venv.
$(DEV_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[lab,test,dev]'
	touch $(DEV_STAMP)

NBDIME_BIN = $(abspath $(BIN))
hooks: $(DEV_STAMP)
	$(BIN)/pre-commit install
	$(BIN)/nbdime config-git --enable
	git config diff.jupyternotebook.command '$(NBDIME_BIN)/git-nbdiffdriver diff'
	git config merge.jupyternotebook.driver '$(NBDIME_BIN)/git-nbmergedriver merge %O %A %B %L %P'
	git config difftool.nbdime.cmd '$(NBDIME_BIN)/git-nbdifftool diff "$$LOCAL" "$$REMOTE" "$$BASE"'
	git config mergetool.nbdime.cmd '$(NBDIME_BIN)/git-nbmergetool merge "$$BASE" "$$LOCAL" "$$REMOTE" "$$MERGED"'

# The browser tests alone (`make unit` runs them too): JupyterLab in the system Chromium, and the
# reading copy opened offline. Without /usr/bin/chromium they skip; REQUIRE_BROWSER=1 fails instead.
browser: $(STAMP)
	$(BIN)/python -m pytest -p no:randomly tests/browser

# A static reading copy of notebooks/ in site/ (open site/index.html): stored outputs and the
# explorers' saved widget state, readable without network. Fetches its pinned browser files with
# npm on first use (tools/site/package.json).
site: $(STAMP)
	$(BIN)/python tools/site/build.py --out site notebooks

# Retrain every stored model (lessonlib/training/checkpoints/): notebook 06's (`train-06`, about five
# minutes on two busy cores, accuracies recorded beside them) and the capstone's character language
# models (`train-lm`, one per position mechanism, about ten minutes, validation losses recorded
# beside them). Deterministic on one machine.
train: train-06 train-lm

train-06: $(STAMP)
	$(BIN)/python -m lessonlib.training.catalog

train-lm: $(STAMP)
	$(BIN)/python -m lessonlib.training.lm_catalog

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
