# Two commands do everything on a machine with only python3:
#   make demo   set up .venv, run the default scenario, print its report
#   make test   set up .venv, lint (ruff, mypy, import layers), build the docs (warnings as errors),
#               run every test (notebooks included, via nbval)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
OUT    ?= out/demo
SCENARIO ?= fanoutsim/examples/default.toml

.PHONY: setup demo test test-fast lint lab bench bench-all clean bytecode docs

setup: $(STAMP)

# The package's bytecode, compiled once rather than in every process: an
# editable install leaves none, and where PYTHONDONTWRITEBYTECODE is set no
# process writes any, so each (a test's subprocess, a sweep's fork server, a
# CLI command) compiled every module again. Only what changed is recompiled.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q fanoutsim

# pip speaks while it installs (a first set-up takes about a minute): no silent minute
$(STAMP): pyproject.toml
	@echo "==> setting up $(VENV): fanoutsim and its dependencies (about a minute, once)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e '.[test,postgres,dask,realqueues,docs,realbrokers]'
	touch $(STAMP)
	@echo "==> $(VENV) is ready"

demo: $(STAMP) bytecode
	$(BIN)/fanoutsim run $(SCENARIO) --out $(OUT)
	@echo ""
	@echo "==> call the command yourself as $(BIN)/fanoutsim, or 'source $(BIN)/activate' first, then e.g.:"
	@echo "      fanoutsim example                               # the scenarios that ship with fanoutsim"
	@echo "      fanoutsim example crashes --out crashes.toml && fanoutsim run crashes.toml"
	@echo "    the documentation site: make docs, then open docs/_build/html/index.html"

# the notebooks under nbval: notebooks/conftest.py starts each one's kernel (over IPC, retried once)
test: $(STAMP) bytecode lint docs
	MPLBACKEND=Agg $(BIN)/python -m pytest -n 2 --dist loadfile tests
	MPLBACKEND=Agg $(BIN)/python -m pytest -p no:cacheprovider -n 2 --dist loadfile --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg notebooks

test-fast: $(STAMP) bytecode
	MPLBACKEND=Agg $(BIN)/python -m pytest -x -q tests

# make lint: ruff (lint, and the format as ruff writes it), mypy --strict over the
# checked modules (pyproject's [tool.mypy]), the import layers (.importlinter)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# make docs: the documentation site in docs/_build/html (open its index.html), warnings as
# errors. The notebooks are shown from their stored outputs (make test executes them). The
# widget JavaScript the lessons' controls need is fetched once with npm, at pinned versions,
# into docs/_build/npm/ (docs/controls.py), and served by the site: it works offline.
# Sphinx is quiet (-q: no line per page); docs/progress.py prints a line per stage instead.
docs: $(STAMP)
	@echo "==> building the documentation site into docs/_build/html (about 20 s; less when little changed)"
	MPLBACKEND=Agg $(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html

# make lab: JupyterLab on the notebook index (00_index). The notebooks are trusted
# first: a new machine has no signature for them, and JupyterLab draws the saved
# widget state of trusted notebooks only (untrusted, a control shows as its repr).
# Their sources (src/, build.py) are hidden. LAB_FLAGS: more jupyter lab flags.
LAB_DIR   ?= notebooks
LAB_HIDE  := __pycache__ *.pyc *.pyo .DS_Store *~ .ipynb_checkpoints src build.py run_all_seconds.json
LAB_FLAGS ?=

lab: $(STAMP)
	$(BIN)/jupyter trust $(LAB_DIR)/*.ipynb
	$(BIN)/jupyter lab --ServerApp.root_dir=$(LAB_DIR) --LabApp.default_url=/lab/tree/00_index.ipynb \
		$(foreach g,$(LAB_HIDE),'--ContentsManager.hide_globs=$(g)') \
		$(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_FLAGS)

# make bench: each speed and memory target measured in its own process (CPU time, or a
# ratio of two runs in one process), printed as figure, target and PASS or FAIL, and
# written to out/bench.json (benchmarks/targets.py; BENCH_FLAGS="--repeat 3" for the best
# of three). make bench-all: that, then every benchmark script's own figures.
BENCH_FLAGS ?=

bench: $(STAMP) bytecode
	$(BIN)/python benchmarks/targets.py $(BENCH_FLAGS)

bench-all: bench
	$(BIN)/python benchmarks/bench_day.py
	$(BIN)/python benchmarks/bench_sweep.py
	$(BIN)/python benchmarks/bench_realtime.py
	$(BIN)/python benchmarks/bench_outbox.py
	$(BIN)/python benchmarks/bench_leases.py
	$(BIN)/python benchmarks/bench_cel.py
	$(BIN)/python benchmarks/bench_postgres.py
	$(BIN)/python benchmarks/bench_core_ratio.py
	$(BIN)/python benchmarks/bench_scale.py
	$(BIN)/python benchmarks/bench_duckdb_idle.py

clean:
	rm -rf $(VENV) out .pytest_cache docs/_build docs/_generated docs/lessons/notebooks
	find fanoutsim -name __pycache__ -type d -prune -exec rm -rf {} +
