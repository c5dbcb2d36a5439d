# Two commands matter: `make lab` (serve the course) and `make test` (run every test).
# Both create the virtual environment in .venv on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NOTEBOOK_DIRS := notebooks

.PHONY: lab test lint unit notebooks execute clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks

test: lint unit notebooks

lint: $(STAMP)
	$(BIN)/ruff check lessonlib tests benchmarks notebooks

unit: $(STAMP)
	$(BIN)/python -m pytest tests

notebooks: $(STAMP)
	$(BIN)/python -m pytest -p no:randomly --nbval --nbval-current-env \
	    --nbval-sanitize-with tests/nbval_sanitize.cfg $(NOTEBOOK_DIRS)

# Re-execute every committed notebook in place (after changing a notebook or the engine).
execute: $(STAMP)
	$(BIN)/python -m lessonlib.notebook_tools execute $(NOTEBOOK_DIRS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
