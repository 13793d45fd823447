# Every target sets itself up: a fresh machine with Python 3.11 needs nothing else.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
STAMP := $(VENV)/.installed
CONFIG ?= configs/train_swe.yaml
MODEL ?= tiny
ENGINE ?= hf
DATASET ?= builtin
INSTANCES ?=
OUTPUT ?= runs/eval-swe
WORKERS ?= 1
ARGS ?=

.PHONY: setup test lint train-swe train-swe-quick eval-swe bench gpu-check clean
.PHONY: sandbox-image reap

setup: $(STAMP)

$(STAMP): pyproject.toml
	@{ command -v bwrap >/dev/null && /usr/bin/python3 -c 'import pytest' 2>/dev/null; } || { \
	  echo "installing bubblewrap and python3-pytest (the local sandbox backend and its test runner)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap python3-pytest >/dev/null; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev,docker,swebench,tracking]"
	@touch $(STAMP)

lint: setup
	$(VENV)/bin/ruff check .

test: setup lint
	$(PY) -m pytest -n 2 $(ARGS)

train-swe: setup
	$(PY) -m trainer.train $(CONFIG) $(ARGS)

# The whole loop of train-swe in miniature (warm start, RL, evaluation before/after): about 2 minutes.
train-swe-quick: setup
	$(PY) -m trainer.train configs/train_swe_quick.yaml $(ARGS)

eval-swe: setup
	$(PY) -m evals.swe --model $(MODEL) --engine $(ENGINE) --dataset $(DATASET) \
	  --instances "$(INSTANCES)" --output $(OUTPUT) --workers $(WORKERS) $(ARGS)

bench: setup
	$(PY) -m bench.sandbox

# The docker sandboxes' base image (debootstrap + docker import; a no-op when up to date).
sandbox-image: setup
	$(PY) -m sandboxes build sandboxes/images/base.yaml

# Remove containers, fork images and directories that dead processes' sandboxes left.
reap: setup
	$(PY) -m sandboxes reap

# On a CUDA machine: the gpu test tier, the GPU benchmark and 3 RL steps of
# configs/train_swe_small_gpu.yaml (MODEL=/path/to/model; docs/gpu.md), one table at the end.
gpu-check: setup
	PY=$(PY) bash scripts/gpu_check.sh

clean:
	rm -rf runs bench/results .pytest_cache
