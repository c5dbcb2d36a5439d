# Two commands matter: `make lab` (serve the course) and `make test` (run every test).
# Both create the virtual environment in .venv on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CROSSCHECK_STAMP := $(VENV)/.crosscheck-installed
NOTEBOOK_DIRS := notebooks solutions exercises

.PHONY: lab test lint unit verify-exercises notebooks execute clean crosscheck browser site train

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Serves the whole course (notebooks/, exercises/, solutions/) and opens the map of the lesson.
lab: $(STAMP)
	$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) --ServerApp.root_dir=. \
	    --ServerApp.default_url=/lab/tree/notebooks/00_start_here.ipynb

test: lint unit verify-exercises notebooks

lint: $(STAMP)
	$(BIN)/ruff check lessonlib tests benchmarks notebooks tools

# tests/crosscheck runs in `make crosscheck` (it needs torch and JAX), not here.
unit: $(STAMP)
	$(BIN)/python -m pytest tests --ignore=tests/crosscheck

# exercises/ is generated from solutions/ (`lessonlib exercises build`); fail when it is stale.
verify-exercises: $(STAMP)
	$(BIN)/lessonlib exercises verify

notebooks: $(STAMP)
	$(BIN)/python -m pytest -p no:randomly --nbval --nbval-current-env \
	    --nbval-sanitize-with tests/nbval_sanitize.cfg $(NOTEBOOK_DIRS)

# Re-measure every claim about torch and JAX on the real libraries (installs the `crosscheck` extra).
# Where the libraries are missing those tests skip; REQUIRE_CROSSCHECK=1 (CI) makes that a failure.
$(CROSSCHECK_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,crosscheck]'
	touch $(CROSSCHECK_STAMP)

crosscheck: $(CROSSCHECK_STAMP)
	$(BIN)/python -m pytest -p no:randomly tests/crosscheck

# Re-execute every committed notebook in place (after changing a notebook or the engine).
execute: $(STAMP)
	$(BIN)/python -m lessonlib.notebook_tools execute $(NOTEBOOK_DIRS)

# The browser tests alone (`make unit` runs them too): JupyterLab in the system Chromium, and the
# reading copy opened offline. Without /usr/bin/chromium they skip; REQUIRE_BROWSER=1 fails instead.
browser: $(STAMP)
	$(BIN)/python -m pytest -p no:randomly tests/browser

# A static reading copy of notebooks/ in site/ (open site/index.html): stored outputs and the
# explorers' saved widget state, readable without network. Fetches its pinned browser files with
# npm on first use (tools/site/package.json).
site: $(STAMP)
	$(BIN)/python tools/site/build.py --out site notebooks

# Retrain notebook 06's stored models (lessonlib/training/checkpoints/) and record their accuracies
# beside them; deterministic on one machine. About five minutes on two busy cores.
train: $(STAMP)
	$(BIN)/python -m lessonlib.training.catalog

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
