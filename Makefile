# Two commands from a fresh clone: `make book` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MATHJAX  := book/_static/mathjax/MathJax.js
JB_FLAGS := --config book/_config.yml --toc book/_toc.yml --path-output book -W -n --keep-going

.PHONY: venv book mathjax trained test test-lib browser-test lab student lint clean

# The environment is rebuilt only when requirements.txt or pyproject.toml change.
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

## book: build the HTML book from the stored notebooks (make test checks them), which reads offline
book: $(STAMP) $(MATHJAX)
	$(BIN)/python -m lib.checks --export-js book/_static/exercises.js
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@echo "The book is at $(CURDIR)/book/_build/html/index.html"

## mathjax: MathJax 2.7 for the book, copied from the jupyter-server-mathjax package (no CDN)
mathjax: $(MATHJAX)
$(MATHJAX): $(STAMP)
	$(BIN)/python -c "import pathlib, shutil, jupyter_server_mathjax as m; \
	shutil.copytree(pathlib.Path(m.__file__).parent / 'static', 'book/_static/mathjax', dirs_exist_ok=True)"
	touch $@

## trained: the capstone GPT of chapter 9, trained once (about two minutes of CPU) and cached
## in .cache/trained/, so that no notebook cell spends minutes training under nbval
trained: $(STAMP)
	$(BIN)/python -c "from lib.capstone import train_capstone; train_capstone(progress=False)"
	$(BIN)/python -c "from lib import capstone as c, digits; c.train_capstone(model_options=c.ONE_LAYER_MODEL, progress=False); digits.train_digits(pool='mean', progress=False)"

## test: library tests, then nbval over every chapter (outputs of cells tagged nbval-check-output must match)
test: $(STAMP) trained
	$(BIN)/python -m pytest tests chapters -m "not browser" --nbval-lax --nbval-current-env -p no:cacheprovider

test-lib: $(STAMP)
	$(BIN)/python -m pytest tests -m "not browser"

## browser-test: headless Chromium reads the built book (after `make book`), offline
browser-test: $(STAMP)
	$(BIN)/python -m pytest tests/test_browser.py -m browser -p no:cacheprovider -v

## lab: open the student copies in JupyterLab (solutions stripped, outputs cleared). They
## are made in student/ the first time; an existing copy is the learner's work and is kept.
lab: $(STAMP)
	$(BIN)/python -m lib.student copy chapters student
	$(BIN)/jupyter lab student $(if $(filter 0,$(shell id -u)),--allow-root)

## student: the student copies alone, in student/ (existing ones are kept)
student: $(STAMP)
	$(BIN)/python -m lib.student copy chapters student

lint: $(STAMP)
	$(BIN)/ruff check lib tests chapters book/_ext
	$(BIN)/ruff format --check lib tests book/_ext

clean:
	rm -rf book/_build .pytest_cache book/_static/mathjax
	@echo "student/ (the learner's work) is kept; remove it by hand if you mean to"
