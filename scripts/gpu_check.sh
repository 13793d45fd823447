#!/usr/bin/env bash
# `make gpu-check`: the GPU tier, the GPU benchmark and a few RL steps on a real model, on a
# machine with CUDA.
#   WHEELS=/path/to/wheels make gpu-check   # vLLM (and its deps) from local wheels: no network needed
#   MODEL=/path/to/model make gpu-check     # the RL steps' model folder (default: the config's model from the HF cache)
#   SANDBOX=local make gpu-check            # the RL steps in bubblewrap sandboxes where there is no Docker engine
# Runs tests marked `gpu` (vLLM engine, weight update, FSDP2 over NCCL, bf16),
# `bench.perf.learner_step --gpu` (tokens/s and MFU of a 0.5B model), then GPU_CHECK_STEPS (3) RL steps of
# configs/train_swe_small_gpu.yaml (vLLM, Docker sandboxes, multi-turn SAO), and prints one table.
# The RL row is skipped, with one line saying how to enable it, when the model is not on this
# machine, no Docker engine (or base image) is there, or the disk cannot hold the final checkpoint.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CONFIG=configs/train_swe_small_gpu.yaml
out=$(mktemp -d)
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu-check: no CUDA device here; nothing to check." >&2
  exit 1
fi
if ! "$PY" -c "import vllm" 2>/dev/null; then
  if [ -n "${WHEELS:-}" ]; then
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" vllm
  else
    "$PY" -m pip install -q vllm || echo "gpu-check: vLLM could not be installed; its tests will skip" >&2
  fi
fi
timeout 360 "$PY" -m pytest -q -m gpu tests/gpu -p no:cacheprovider --junitxml="$out/gpu.xml" | tee "$out/pytest.txt"
tests_rc=${PIPESTATUS[0]}
timeout 240 "$PY" -m bench.perf.learner_step --gpu --json "$out/learner_gpu.json"
bench_rc=$?

# -- a few RL steps of the small GPU config ----------------------------------------------------
rl_status=""  # empty: ran (the exit code is in rl_rc); else why it was skipped
rl_rc=0
model=${MODEL:-}
if [ -n "$model" ] && [ ! -f "$model/config.json" ]; then
  echo "gpu-check: MODEL=$model is not a model folder (no config.json); RL steps skipped" >&2
  rl_status="skipped (no local model)"
elif [ -z "$model" ]; then
  name=$("$PY" -c "from trainer.resolve import load_config; print(load_config('$CONFIG').model.name)")
  model=$(HF_HUB_OFFLINE=1 "$PY" -c "from huggingface_hub import snapshot_download; print(snapshot_download('$name', local_files_only=True))" 2>/dev/null)
  if [ -z "$model" ]; then
    echo "gpu-check: $name is not on this machine; RL steps skipped (hf download $name --local-dir DIR, then MODEL=DIR make gpu-check)" >&2
    rl_status="skipped (no local model)"
  fi
fi
sandbox=${SANDBOX:-docker}
if [ -z "$rl_status" ] && [ "$sandbox" = docker ]; then
  why=$("$PY" -c "from sandboxes.docker_backend import docker_available; print(docker_available() or '')" 2>&1 | tail -n 1)
  if [ -n "$why" ]; then
    echo "gpu-check: $why; RL steps skipped (start one with bash scripts/docker_engine.sh and make sandbox-image, or SANDBOX=local make gpu-check)" >&2
    rl_status="skipped (no Docker engine)"
  fi
fi
if [ -z "$rl_status" ]; then
  # The run ends with a checkpoint: fp32 weights and AdamW moments of policy and critic, about
  # 15x the model's bf16 weights (45 GB for 1.5B). Written under $out, removed afterwards.
  need=$(du -sLk "$model" | cut -f1); need=$((need * 15))
  free=$(df -Pk "$out" | awk 'NR==2 {print $4}')
  if [ "$free" -lt "$need" ]; then
    echo "gpu-check: $((need / 1048576)) GB free needed under $out for the run's final checkpoint; RL steps skipped (TMPDIR=/roomier/dir make gpu-check)" >&2
    rl_status="skipped (disk)"
  fi
fi
if [ -z "$rl_status" ]; then
  HF_HUB_OFFLINE=1 timeout 360 "$PY" -m trainer.train "$CONFIG" "model.name=$model" "tasks.sandbox_backend=$sandbox" \
    "run.output_dir=$out/rl" run.name=small-gpu "run.steps=${GPU_CHECK_STEPS:-3}" run.checkpoint_every=0 \
    orchestrator.episodes_per_step=8 warm_start.critic_pretrain_steps=0 evaluation.episodes=0
  rl_rc=$?
  rm -rf "$out/rl/small-gpu/checkpoints" "$out/rl/engine-models"
fi

"$PY" - "$out" "$tests_rc" "$bench_rc" "$rl_rc" "$rl_status" <<'PYEOF'
import json, sys, xml.etree.ElementTree as ET
out, tests_rc, bench_rc, rl_rc, rl_status = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rows = []
try:
    suite = ET.parse(f"{out}/gpu.xml").getroot().find("testsuite") or ET.parse(f"{out}/gpu.xml").getroot()
    for case in suite.iter("testcase"):
        status = "failed" if case.find("failure") is not None or case.find("error") is not None else (
            "skipped" if case.find("skipped") is not None else "passed")
        rows.append((case.get("name"), status))
except (OSError, ET.ParseError):
    rows.append(("gpu tests", f"no report (pytest exit {tests_rc})"))
try:
    rows += [(k, f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in json.load(open(f"{out}/learner_gpu.json")).items()]
except OSError:
    rows.append(("bench.perf.learner_step --gpu", f"no result (exit {bench_rc})"))
title = "RL steps, train_swe_small_gpu.yaml"
if rl_status:
    rows.append((title, rl_status))
else:
    try:
        steps = [json.loads(line) for line in open(f"{out}/rl/small-gpu/metrics.jsonl") if line.strip()]
    except OSError:
        steps = []
    with_episodes = [s for s in steps if s.get("episodes")]
    episodes = sum(s["episodes"] for s in with_episodes)
    ended = "passed" if rl_rc == 0 else ("timed out (360 s)" if rl_rc == 124 else f"failed (exit {rl_rc})")
    rows.append((title, ended))
    rows.append(("  steps done", str(len(steps))))
    if episodes:
        mean = lambda key: sum(s[key] * s["episodes"] for s in with_episodes) / episodes
        rows.append(("  turns per episode (mean)", f"{mean('turns_mean'):.2f}"))
        rows.append(("  success rate", f"{mean('success_rate'):.3f} ({episodes} episodes)"))
    if steps:
        rows.append(("  seconds per step", f"{sum(s['step_seconds'] for s in steps) / len(steps):.1f}"))
width = max(len(r[0]) for r in rows)
print("\ngpu-check\n" + "-" * (width + 24))
for name, value in rows:
    print(f"{name:<{width}}  {value}")
sys.exit(1 if tests_rc or bench_rc or rl_rc else 0)
PYEOF
