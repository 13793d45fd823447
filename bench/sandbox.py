"""Local sandbox latency: a command through the persistent shell vs a fresh bwrap per command.

Baseline (same run, side by side): `bwrap ... bash -c CMD` started anew for each command,
which is what a sandbox without a persistent process costs. Also: sandbox start, and
`fork()` of a 50 MB workspace in 5,000 files.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import arguments, percentile, report
from sandboxes import SandboxSpec, make_sandbox

ROUNDS = 200


def _workspace(root: Path, files: int, total_bytes: int) -> Path:
    root.mkdir()
    chunk = os.urandom(total_bytes // files)
    for i in range(files):
        folder = root / f"d{i % 50}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i}.bin").write_bytes(chunk)
    return root


def main() -> None:
    args = arguments("sandbox")
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "small"
        small.mkdir()
        (small / "a.txt").write_text("a\n")
        started = time.perf_counter()
        sandbox = make_sandbox(SandboxSpec(workspace=small))
        start_ms = (time.perf_counter() - started) * 1000
        persistent, fresh = [], []
        baseline_cmd = sandbox.bwrap_args() + ["bash", "-c", "true"]  # same mounts, no supervisor
        for _ in range(ROUNDS):  # interleaved, so load on the machine hits both alike
            t = time.perf_counter()
            sandbox.exec("true")
            persistent.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            subprocess.run(baseline_cmd, check=True)
            fresh.append((time.perf_counter() - t) * 1000)
        sandbox.close()

        big = _workspace(Path(tmp) / "big", files=5000, total_bytes=50 * 1024 * 1024)
        with make_sandbox(SandboxSpec(workspace=big)) as parent:
            forks = []
            for _ in range(3):
                t = time.perf_counter()
                child = parent.fork()
                forks.append((time.perf_counter() - t) * 1000)
                child.close()

    figures = {
        "local_exec_p50_ms": percentile(persistent, 50),
        "local_exec_p99_ms": percentile(persistent, 99),
        "fresh_bwrap_exec_p50_ms": percentile(fresh, 50),
        "fresh_bwrap_exec_p99_ms": percentile(fresh, 99),
        "speedup_p50": percentile(fresh, 50) / percentile(persistent, 50),
        "local_start_ms": start_ms,
        "local_fork_ms": percentile(forks, 50),
        "rounds": ROUNDS,
    }
    report("bench.sandbox (local backend)", figures, args.json)


if __name__ == "__main__":
    main()
