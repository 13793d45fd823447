#!/usr/bin/env bash
# `make gpu-check`: the GPU tier and the GPU benchmark in one go, on a machine with CUDA.
#   WHEELS=/path/to/wheels make gpu-check   # vLLM (and its deps) from local wheels: no network needed
# Runs tests marked `gpu` (vLLM engine, weight update, FSDP2 over NCCL, bf16) and
# `bench.learner --gpu` (tokens/s and MFU of a 0.5B model), then prints one table.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
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
timeout 240 "$PY" -m bench.learner --gpu --json "$out/learner_gpu.json"
bench_rc=$?
"$PY" - "$out" "$tests_rc" "$bench_rc" <<'PYEOF'
import json, sys, xml.etree.ElementTree as ET
out, tests_rc, bench_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
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
    rows.append(("bench.learner --gpu", f"no result (exit {bench_rc})"))
width = max(len(r[0]) for r in rows)
print("\ngpu-check\n" + "-" * (width + 24))
for name, value in rows:
    print(f"{name:<{width}}  {value}")
sys.exit(1 if tests_rc or bench_rc else 0)
PYEOF
