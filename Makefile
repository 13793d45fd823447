# Every target sets itself up: a fresh machine with Python 3.11 needs nothing else.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
STAMP := $(VENV)/.installed
# OpenHands (openhands-sdk) needs Python 3.12: a venv of its own, never imported by .venv's code.
OH_VENV := .venv-openhands
OH_STAMP := $(OH_VENV)/.installed
# Harbor (the `harbor` package) also needs Python 3.12: agent_env.harbor_provider runs in it.
HARBOR_VENV := .venv-harbor
HARBOR_STAMP := $(HARBOR_VENV)/.installed
PYTHON312 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12) $(shell command -v python3.12))
CONFIG ?= configs/train_swe.yaml
MODEL ?= tiny
ENGINE ?= hf
DATASET ?= builtin
INSTANCES ?=
OUTPUT ?= runs/eval-swe
WORKERS ?= 1
ARGS ?=

.PHONY: setup test test-fast test-realrows lint train-swe train-swe-quick eval-swe verify-verified bench gpu-check clean
.PHONY: sandbox-image reap openhands-venv harbor-venv swebench-downloads

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

# A Python 3.12 venv from a pinned requirements file, rebuilt when that changes:
# $(call py312_venv,TARGET,VENV,REQUIREMENTS).
define py312_venv
	@test -n "$(PYTHON312)" || { echo "error: make $(1) needs Python 3.12 (pyenv install 3.12, or PYTHON312=/path/to/python3.12)" >&2; exit 2; }
	@test -x $(2)/bin/python || $(PYTHON312) -m venv $(2)
	$(2)/bin/python -m pip install -q --upgrade pip
	$(2)/bin/python -m pip install -q -r $(3)
	@touch $(2)/.installed
endef

# The OpenHands venv (evals.openhands_run runs in it; evals/README.md).
openhands-venv: $(OH_STAMP)

$(OH_STAMP): evals/openhands-requirements.txt
	$(call py312_venv,openhands-venv,$(OH_VENV),evals/openhands-requirements.txt)

# The Harbor venv (harbor run with our sandboxes: tasks/README.md, "Harbor tasks").
harbor-venv: $(HARBOR_STAMP)

$(HARBOR_STAMP): agent_env/harbor-requirements.txt
	$(call py312_venv,harbor-venv,$(HARBOR_VENV),agent_env/harbor-requirements.txt)

lint: setup
	$(VENV)/bin/ruff check .

# The whole suite, as CI runs it; the 25 slowest tests listed at the end.
test: setup lint
	$(PY) -m pytest -n 2 --maxschedchunk 1 --durations=25 $(ARGS)

# Before every commit: the unit tiers of every package (no Docker, no Ray cluster, no slow,
# adversarial, GPU or real-row tests).
FAST := not docker and not ray and not slow and not adversarial and not gpu and not realrows
test-fast: setup lint
	$(PY) -m pytest -n 2 -m "$(FAST)" --durations=10 $(ARGS)

# Real SWE-bench Verified rows from clones of their repositories (tasks/README.md):
# SWE_REPO_CACHE=~/swe-repos make test-realrows   (builds each spec's environment once)
test-realrows: setup
	@test -n "$$SWE_REPO_CACHE" || { echo "SWE_REPO_CACHE is not set: give a folder of git clones, e.g. SWE_REPO_CACHE=~/swe-repos make test-realrows"; exit 2; }
	$(PY) -m pytest -m realrows tests/tasks/test_realrows.py -v -rs $(ARGS)

train-swe: setup
	$(PY) -m trainer.train $(CONFIG) $(ARGS)

# The whole loop of train-swe in miniature (warm start, RL, evaluation before/after): about 2 minutes.
train-swe-quick: setup
	$(PY) -m trainer.train configs/train_swe_quick.yaml $(ARGS)

# ARGS: any other option, as `section.field=value` (as train-swe takes them) or its flag (`python -m evals.swe --help`).
eval-swe: setup
	$(PY) -m evals.swe --model $(MODEL) --engine $(ENGINE) --dataset $(DATASET) \
	  --instances "$(INSTANCES)" --output $(OUTPUT) --workers $(WORKERS) $(ARGS)

# Every SWE-bench Verified row graded offline, gold and empty patch, from a folder of clones
# (tasks/README.md, "All of Verified"): SWE_REPO_CACHE=~/swe-repos make verify-verified.
# Resumable (the same command goes on after Ctrl-C or a crash); each row's own environment
# copy is deleted after its verdict (--prune: the specs' shared ones stay); VERIFIED= a rows .jsonl
# (default: the hub's dataset), SANDBOX=docker, SHARD=2/4 for the second of four slices.
# Files SWE-bench builds fetch from hosts other than PyPI (matplotlib's qhull, FreeType,
# jQuery UI), into $SWE_REPO_CACHE/downloads, for machines that cannot reach those hosts.
swebench-downloads: setup
	@test -n "$$SWE_REPO_CACHE" || { echo "SWE_REPO_CACHE is not set: e.g. SWE_REPO_CACHE=~/swe-repos make swebench-downloads"; exit 2; }
	$(PY) -m tasks.swebench_downloads "$$SWE_REPO_CACHE/downloads" $(ARGS)

VERIFIED ?= verified
VERIFY_OUT ?= runs/verify-verified
SANDBOX ?= local
verify-verified: setup
	@test -n "$$SWE_REPO_CACHE" || { echo "SWE_REPO_CACHE is not set: give a folder of git clones, e.g. SWE_REPO_CACHE=~/swe-repos make verify-verified"; exit 2; }
	$(PY) -m agent_env validate $(VERIFIED) --repo-cache "$$SWE_REPO_CACHE" --out $(VERIFY_OUT) --prune \
	  --sandbox $(SANDBOX) $(if $(SHARD),--shard $(SHARD)) $(ARGS)

bench: setup
	$(PY) -m bench.perf.sandbox

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
