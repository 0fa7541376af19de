# Two commands from a fresh clone: `make book` and `make test`. Both set up .venv first.
# `make` alone (or `make help`) lists the targets.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MATHJAX  := book/_static/mathjax/MathJax.js
JB_FLAGS := --config book/_config.yml --toc book/_toc.yml --path-output book -W -n --keep-going

.PHONY: help venv book book-print mathjax trained test test-avx2 test-lib browser-test lab student check check-ruff check-format check-doctest check-layout lint clean
.DEFAULT_GOAL := help

## help: this list (what `make` alone prints)
help:
	@echo "make TARGET, from the repository root. The first make book or make test sets up .venv."
	@echo
	@awk '/^## [a-z0-9-]+:/ { sub(/^## /, ""); i = index($$0, ":"); printf "  %-13s %s\n", substr($$0, 1, i - 1), substr($$0, i + 2); next } \
	      /^## / { sub(/^## /, ""); printf "  %-13s %s\n", "", $$0 }' $(MAKEFILE_LIST)

# Python 3.10 or newer, checked before minutes of installing: the venv's own Python once
# it exists, else $(PYTHON).
PY_OK := import sys; v = sys.version_info; sys.exit(0 if v >= (3, 10) else \
	f"Python 3.10 or newer is needed, and {sys.executable} is {v.major}.{v.minor}: run make PYTHON=python3.11 (or another 3.10+), after rm -rf $(VENV) if it was made with this one")

# The environment is rebuilt only when requirements.txt, constraints.txt (every version, pinned) or
# pyproject.toml change.
$(STAMP): requirements.txt constraints.txt pyproject.toml
	@command -v $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) >/dev/null || \
	  { echo "$(PYTHON) not found: install Python 3.10+ or run make PYTHON=/path/to/python3"; exit 1; }
	@$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) -c '$(PY_OK)'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing requirements.txt at the versions constraints.txt pins into $(VENV): about 2 minutes the first time (torch is the largest)"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -r requirements.txt -c constraints.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

## book: build the HTML book from the stored notebooks (make test checks them), which reads offline
book: $(STAMP) $(MATHJAX)
	$(BIN)/python -m lib.checks --export-js book/_static/exercises.js
	@# Sphinx 7 does not overwrite a static file it copied before, so an edited book.css or
	@# script would not reach the pages: build from scratch (about 15 s; nothing is executed)
	rm -rf book/_build
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@echo "The book is at $(CURDIR)/book/_build/html/index.html"

## book-print: the whole book as one page, book/_build/singlehtml/index.html, to print or save as a PDF
## from the browser's print dialogue (book/_static/print.css: no sidebars or buttons, a chapter per sheet)
book-print: $(STAMP) $(MATHJAX)
	$(BIN)/python -m lib.checks --export-js book/_static/exercises.js
	rm -rf book/_build/singlehtml
	$(BIN)/jupyter-book build . $(JB_FLAGS) --builder singlehtml
	@echo "The whole book on one page: $(CURDIR)/book/_build/singlehtml/index.html (print it, or save it as a PDF)"

## mathjax: MathJax 2.7 for the book, copied from the jupyter-server-mathjax package (no CDN)
mathjax: $(MATHJAX)
$(MATHJAX): $(STAMP)
	$(BIN)/python -c "import pathlib, shutil, jupyter_server_mathjax as m; \
	shutil.copytree(pathlib.Path(m.__file__).parent / 'static', 'book/_static/mathjax', dirs_exist_ok=True)"
	touch $@

## trained: the models chapters 8 and 9 read (the capstone GPT, its one-layer twin, the same GPT on Python's
## help texts, the ViTs and the CNN), trained once (about seven minutes of CPU, two processes at once on
## two cores) and cached in .cache/trained/, so that no notebook cell spends minutes training under nbval
# trained, test and test-lib run tools/run.py (standard library only), which README gives for a machine
# without make, so the two cannot drift. Each training process computes on one thread, as the notebooks
# and python -m lib.capstone_seeds train: the thread count changes how a matrix product is summed, so
# the cached run is one the seeds table could hold.
RUN := $(BIN)/python tools/run.py
trained: $(STAMP)
	$(RUN) trained

## test: library tests, then nbval over every chapter (outputs of cells tagged nbval-check-output must match).
## A cell may take NBVAL_CELL_TIMEOUT seconds (nbval's default is 2000): the slowest, chapter 8's
## training with an empty cache, took 72 s on two busy cores. A notebook in which a cell timed
## out (a stalled kernel) is run once more, and the output says so (tests/nbval_rerun.py).
## The tests run on TEST_WORKERS processes at once (pytest-xdist; default: one per core, at most 4,
## since each notebook's kernel holds a few hundred MB), each test file and each notebook whole on
## one of them (--dist loadscope: a notebook's cells share one kernel). Each worker, and each kernel
## and grader it starts, computes on one thread: with a worker per core, torch's own threads only
## wait on each other (chapter 8's training cell took 14 s on two threads beside the other worker,
## 3.7 s on one). Every checked output is the same on one thread as on several.
## make test TEST_WORKERS=2 NBVAL_CELL_TIMEOUT=600 PYTEST_ARGS="--durations=20" sets the workers, the
## cell limit (300 s by default) and adds pytest options (PARALLEL, their old name, still adds them);
## tools/run.py test --help says the same. make test trains first, as make trained does.
TEST_WORKERS ?=
NBVAL_CELL_TIMEOUT ?=
PYTEST_ARGS ?=
TEST_OPTIONS = $(if $(TEST_WORKERS),--workers $(TEST_WORKERS)) $(if $(NBVAL_CELL_TIMEOUT),--cell-timeout $(NBVAL_CELL_TIMEOUT))
TO_PYTEST = $(if $(strip $(PARALLEL) $(PYTEST_ARGS)),-- $(PARALLEL) $(PYTEST_ARGS))
test: $(STAMP)
	$(RUN) test $(TEST_OPTIONS) $(TO_PYTEST)

## test-avx2: every chapter under nbval again, with AVX2 kernels (an AVX2 laptop's) and every model retrained
## from scratch into .cache/trained-avx2 (CI runs it after make test). Left out, by name: chapter 2's four
## precision cells, where torch 2.13's bf16/fp16 SDPA raises "pack_vnni2 is only supported when avx512 is
## supported", a quirk of forcing AVX2 kernels on an AVX-512 CPU that a real AVX2 CPU never meets.
AVX2_ENV := BOOK_CACHE_DIR=$(CURDIR)/.cache/trained-avx2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2
AVX2_LEFT_OUT := $(foreach n,29 30 31 32,--deselect "chapters/02_batches_and_heads.ipynb::Cell $(n)")
test-avx2: $(STAMP)
	$(AVX2_ENV) $(RUN) test chapters $(TEST_OPTIONS) -- $(AVX2_LEFT_OUT) $(PARALLEL) $(PYTEST_ARGS)

## test-lib: the library tests alone (no notebooks)
test-lib: $(STAMP)
	$(RUN) test-lib $(TO_PYTEST)

## browser-test: headless Chromium reads the built book (after `make book`), offline, at 400,
## 800 and 1280 px, with axe-core checking every page's accessibility; and a student copy in a
## headless JupyterLab renders its MyST warnings
# axe-core comes from the npm registry, installed once into .cache/npm (git ignores .cache/):
# the pages never load it, the test puts it into each page it checks. Without npm the rest of
# the browser test runs and the accessibility test skips (in CI, where npm is installed, it fails).
AXE_CORE := .cache/npm/node_modules/axe-core/axe.min.js
AXE_CORE_VERSION := 4.14.1
$(AXE_CORE):
	@if command -v npm >/dev/null; then \
	  npm install --prefix .cache/npm --no-save --no-audit --no-fund axe-core@$(AXE_CORE_VERSION); \
	else echo "npm not found (Debian: apt-get install npm): the accessibility test will skip"; fi

browser-test: $(STAMP) $(AXE_CORE)
	$(BIN)/python -m pytest tests/test_browser.py tests/test_lab_browser.py -m browser -p no:cacheprovider -v

## lab: open the student copies in JupyterLab (solutions stripped, outputs cleared). They
## are made in student/ the first time; an existing copy is the learner's work and is kept.
lab: $(STAMP)
	$(BIN)/python -m lib.student copy chapters student
	$(BIN)/jupyter lab student $(if $(filter 0,$(shell id -u)),--allow-root)

## student: the student copies alone, in student/ (existing ones are kept)
student: $(STAMP)
	$(BIN)/python -m lib.student copy chapters student

## check: the fast checks, in seconds (CI runs them first): ruff at the stated line lengths
## (120 in lib/tests/tools/book/_ext, 80 in the chapters' code), the format check, the examples in
## lib's docstrings, and the layout check where ../shared holds it (a reader's clone has none).
## .pre-commit-config.yaml runs the same four targets.
check: check-ruff check-format check-doctest check-layout

check-ruff: $(STAMP)
	$(BIN)/ruff check lib tests tools chapters book/_ext

check-format: $(STAMP)
	$(BIN)/ruff format --check lib tests tools book/_ext

check-doctest: $(STAMP)
	$(BIN)/python -m pytest --doctest-modules lib -p no:cacheprovider

LAYOUT_CHECK := ../shared/tools/check_book.py
# The layout check always exits 0 and prints one line per note: any note fails the target.
check-layout: $(STAMP)
	@if [ -f $(LAYOUT_CHECK) ]; then \
	  out="$$($(BIN)/python $(LAYOUT_CHECK))" || exit 1; echo "$$out"; \
	  if [ "$$out" != "layout check: nothing to point at" ]; then echo "layout check failed"; exit 1; fi; \
	else echo "layout check skipped: no $(LAYOUT_CHECK) beside this clone"; fi

## lint: the old name of check
lint: check

## clean: remove the built book and the MathJax copy (student/ is kept)
clean:
	rm -rf book/_build .pytest_cache book/_static/mathjax
	@echo "student/ (the learner's work) is kept; remove it by hand if you mean to"
