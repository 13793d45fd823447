"""The one-GPU config (`configs/train_swe_small_gpu.yaml`) and `make gpu-check` (`scripts/gpu_check.sh`),
checked on CPU: the config through the real loader, the script with a stand-in `python`
that plays torch, pytest, the benchmark and the trainer (everything else goes to the real one)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.resolve import load_config

ROOT = Path(__file__).parents[1]
CONFIG = ROOT / "configs" / "train_swe_small_gpu.yaml"
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def test_small_gpu_config_is_a_real_model_on_vllm_and_docker_multi_turn():
    config = load_config(CONFIG)
    assert (config.model.engine, config.tasks.sandbox_backend, config.tasks.source) == ("vllm", "docker", "builtin")
    size = re.search(r"-(\d+(?:\.\d+)?)B\b", config.model.name)
    assert size and 0.5 <= float(size[1]) <= 1.5, config.model.name
    assert config.rollout.max_turns >= 5 and config.rollout.max_new_tokens < config.rollout.max_total_tokens <= 32768
    assert config.learner.token_budget >= config.rollout.max_total_tokens  # one full episode per micro-batch
    assert config.learner.bf16 and config.warm_start.steps == 0


def test_small_gpu_config_uses_the_papers_sao_settings_like_the_8_gpu_config():
    small, large = load_config(CONFIG), load_config(ROOT / "configs" / "train_swe_gpu.yaml")
    assert small.algorithm == large.algorithm and small.algorithm.name == "sao"
    assert small.learner.critic_lr == large.learner.critic_lr == 5e-6


def test_small_gpu_config_fits_one_gpu():
    placement, workers = load_config(CONFIG).placement, load_config(CONFIG).orchestrator.rollout_workers
    assert placement.learner_gpus > 0 and placement.worker_gpus > 0
    assert placement.learner_ranks * placement.learner_gpus + workers * placement.worker_gpus <= 1.0


def test_small_gpu_config_model_is_overridable_by_a_local_folder(tmp_path):
    assert load_config(CONFIG, [f"model.name={tmp_path}"]).model.name == str(tmp_path)


def test_gpu_check_script_parses_and_runs_the_small_gpu_config():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    assert "configs/train_swe_small_gpu.yaml" in SCRIPT.read_text()


FAKE_PYTHON = """#!/usr/bin/env bash
# torch's CUDA probe, vLLM, pytest, bench.perf.learner_step and trainer.train played; the rest is real Python.
case "$1 $2" in
  "-c import torch"*) exit "$FAKE_CUDA_RC" ;;
  "-c import vllm") exit 0 ;;
  "-c "*docker_available*) echo "$FAKE_DOCKER_WHY"; exit 0 ;;
  "-m pytest")
    for a in "$@"; do case "$a" in --junitxml=*) echo '<testsuites><testsuite><testcase name="test_a"/></testsuite></testsuites>' > "${a#--junitxml=}" ;; esac; done
    exit 0 ;;
  "-m bench.perf.learner_step") echo '{"tokens_per_s": 1.5}' > "$5"; exit 0 ;;
  "-m trainer.train")
    echo "$@" > "$FAKE_LOG"
    for a in "$@"; do case "$a" in run.output_dir=*) dir="${a#run.output_dir=}/small-gpu" ;; esac; done
    mkdir -p "$dir"
    echo '{"step": 1, "episodes": 8, "turns_mean": 4.0, "success_rate": 0.25, "step_seconds": 30.0}' >> "$dir/metrics.jsonl"
    echo '{"step": 2, "episodes": 8, "turns_mean": 6.0, "success_rate": 0.5, "step_seconds": 20.0}' >> "$dir/metrics.jsonl"
    exit 0 ;;
esac
exec "$REAL_PYTHON" "$@"
"""


def _gpu_check(tmp_path, *, cuda: bool, **env) -> subprocess.CompletedProcess:
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if k not in ("MODEL", "SANDBOX", "HF_HUB_CACHE")}
    env = {
        **base,
        "PY": str(fake),
        "REAL_PYTHON": sys.executable,
        "FAKE_CUDA_RC": "0" if cuda else "1",
        "FAKE_DOCKER_WHY": "",
        "FAKE_LOG": str(tmp_path / "train_args"),
        "HF_HOME": str(tmp_path / "hf"),  # an empty HF cache: the config's model is not here
        "TMPDIR": str(tmp_path),
        **env,
    }
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)


def test_gpu_check_without_cuda_exits_with_one_line(tmp_path):
    result = _gpu_check(tmp_path, cuda=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == ["gpu-check: no CUDA device here; nothing to check."]


def test_gpu_check_skips_the_rl_steps_without_a_local_model(tmp_path):
    result = _gpu_check(tmp_path, cuda=True)
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("gpu-check:")]
    assert "is not on this machine" in line and "MODEL=DIR make gpu-check" in line
    assert re.search(r"^RL steps, train_swe_small_gpu.yaml +skipped \(no local model\)$", result.stdout, re.M)
    assert not (tmp_path / "train_args").exists()


def test_gpu_check_skips_the_rl_steps_without_docker(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    result = _gpu_check(tmp_path, cuda=True, MODEL=str(model), FAKE_DOCKER_WHY="no Docker engine at the default socket")
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("gpu-check:")]
    assert line.startswith("gpu-check: no Docker engine at the default socket; RL steps skipped")
    assert re.search(r"^RL steps, train_swe_small_gpu.yaml +skipped \(no Docker engine\)$", result.stdout, re.M)


@pytest.mark.parametrize("sandbox", ["docker", "local"])
def test_gpu_check_runs_the_rl_steps_and_tabulates_their_metrics(tmp_path, sandbox):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    result = _gpu_check(tmp_path, cuda=True, MODEL=str(model), SANDBOX=sandbox)
    assert result.returncode == 0, result.stderr
    args = (tmp_path / "train_args").read_text().split()
    assert args[:3] == ["-m", "trainer.train", "configs/train_swe_small_gpu.yaml"]
    assert {f"model.name={model}", f"tasks.sandbox_backend={sandbox}", "run.steps=3"} <= set(args)
    load_config(CONFIG, args[3:])  # the overrides the script passes are valid fields
    table = dict(re.findall(r"^(\S.*?|  \S.*?)  +(\S.*)$", result.stdout, re.M))
    assert table["RL steps, train_swe_small_gpu.yaml"] == "passed"
    assert table["  steps done"] == "2"
    assert table["  turns per episode (mean)"] == "5.00"
    assert table["  success rate"] == "0.375 (16 episodes)"
    assert table["  seconds per step"] == "25.0"


def test_gpu_check_takes_the_configs_model_from_the_hf_cache(tmp_path):
    name = load_config(CONFIG).model.name
    repo = tmp_path / "hf" / "hub" / f"models--{name.replace('/', '--')}"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    result = _gpu_check(tmp_path, cuda=True)
    assert result.returncode == 0, result.stderr
    assert f"model.name={snapshot}" in (tmp_path / "train_args").read_text().split()
