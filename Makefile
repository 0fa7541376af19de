# Two commands from a fresh clone: `make book` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JB_FLAGS := --config book/_config.yml --toc book/_toc.yml --path-output book -W -n --keep-going

.PHONY: venv book test test-lib lab student lint clean

# The environment is rebuilt only when requirements.txt or pyproject.toml change.
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

## book: execute the notebooks (cached) and build the HTML book
book: $(STAMP)
	$(BIN)/python -m lib.checks --export-js book/_static/exercises.js
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@echo "The book is at $(CURDIR)/book/_build/html/index.html"

## test: library tests, then nbval over every chapter (numbers marked NBVAL_CHECK_OUTPUT must match)
test: $(STAMP)
	$(BIN)/python -m pytest tests chapters --nbval-lax --nbval-current-env -p no:cacheprovider

test-lib: $(STAMP)
	$(BIN)/python -m pytest tests

## lab: open the chapters in JupyterLab with the book's environment
lab: $(STAMP)
	$(BIN)/jupyter lab chapters $(if $(filter 0,$(shell id -u)),--allow-root)

## student: copies of the chapters with the solutions stripped, in student/
student: $(STAMP)
	$(BIN)/python -m lib.student copy chapters student

lint: $(STAMP)
	$(BIN)/ruff check lib tests chapters
	$(BIN)/ruff format --check lib tests

clean:
	rm -rf book/_build student .pytest_cache
