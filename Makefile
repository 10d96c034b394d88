# Two commands do everything on a machine with only python3:
#   make demo   set up .venv, run the default scenario, print its report
#   make test   set up .venv, run every test (notebooks included, via nbval)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
OUT    ?= out/demo
SCENARIO ?= data/scenarios/default.toml

.PHONY: setup demo test test-fast lab bench clean bytecode

setup: $(STAMP)

# The package's bytecode, compiled once rather than in every process: an
# editable install leaves none, and where PYTHONDONTWRITEBYTECODE is set no
# process writes any, so each (a test's subprocess, a sweep's fork server, a
# CLI command) compiled every module again. Only what changed is recompiled.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q fanoutsim

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,postgres,dask]'
	touch $(STAMP)

demo: $(STAMP) bytecode
	$(BIN)/fanoutsim run $(SCENARIO) --out $(OUT)

test: $(STAMP) bytecode
	MPLBACKEND=Agg $(BIN)/python -m pytest -n 2 --dist loadfile tests
	MPLBACKEND=Agg $(BIN)/python -m pytest -p no:cacheprovider -n 2 --dist loadfile --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg notebooks

test-fast: $(STAMP) bytecode
	MPLBACKEND=Agg $(BIN)/python -m pytest -x -q tests

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

bench: $(STAMP) bytecode
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
	rm -rf $(VENV) out .pytest_cache
	find fanoutsim -name __pycache__ -type d -prune -exec rm -rf {} +
