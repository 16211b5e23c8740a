# Quick start: `make run` (main job on the built-in corpus), `make test` (test suite).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup run test test-all bench clean-cache gpu-check

setup: $(STAMP)

# The CPU torch is installed first and pinned, so nothing pulls a CUDA build (DEVELOPERS.md).
$(STAMP): pyproject.toml constraints.txt scripts/ensure_torchaudio.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[test,slurm,utility,docs]'
	$(PY) scripts/ensure_torchaudio.py
	touch $@

run: setup
	@$(PY) -m pipeline $(ARGS)

# The import contract (.importlinter: one-way layers, independent stages, no cycles) first.
test: setup
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q $(ARGS)

test-all: setup
	$(PY) -m pytest -q -m '' $(ARGS)

# On a CUDA machine (offline wheels, no venv): README "GPU check". Not for this CPU venv.
gpu-check:
	bash scripts/gpu_check.sh $(ARGS)

clean-cache:
	rm -rf data/cache data/runs
