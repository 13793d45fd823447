"""Sandbox latency, start, fork and leak figures for the local and docker backends.

Baselines, measured in the same run, side by side (interleaved, so load hits both alike):
- local exec: a fresh `bwrap ... bash -c CMD` per command (no persistent process);
- docker exec: a plain `docker exec CONTAINER true` per command (the CLI);
exec latency alternates blocks of `BLOCK` round trips with the baseline's share of runs:
a round trip right after each baseline run measured that process's start (its cache
misses and wake-ups: 0.86 ms p50 against 0.21 ms back to back, local, calm, 2026-12-07),
not the round trip;
- local fork: the "copy" layout's fork, a full `cp -a` of the workspace (the old way); and
  beside it a fork taken from a sandbox `prefork` started 0.1 s before (`AHEAD_S`), with the
  prefork call's own time.
Forks are of a 50 MB workspace in 5,000 files, after the parent changed a few files.

Leaks: 200 episodes, each in its own worker process (start a docker sandbox, run a few
commands, close); 5% of the workers are SIGKILLed in the middle of a command, then the
reaper runs; `leaked_containers` counts this run's containers still there after it.
Without an engine the docker figures are skipped, and the table says why.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from bench.common import arguments, docker_problem, percentile, report
from sandboxes import SandboxSpec, make_sandbox
from sandboxes.local import LocalSandbox

ROUNDS = 200
CLI_ROUNDS = 50
BLOCK = 20
STARTS = 10
FORKS = 5
AHEAD_S = 0.1
"""What a caller does between `prefork` and its fork in the "started ahead" figure: a command
of 0.1 s (a tree rollout's scoring, a test run)."""
EPISODES = 200
KILLED_EVERY = 20  # 5%
WORKERS = 4
ROOT = Path(__file__).resolve().parent.parent


def _workspace(root: Path, files: int, total_bytes: int) -> Path:
    """Deterministic content, so the docker backend's workspace image is reused across runs."""
    root.mkdir()
    rng = random.Random(0)
    size = total_bytes // files
    for i in range(files):
        folder = root / f"d{i % 50}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i}.bin").write_bytes(rng.randbytes(size))
    return root


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _exec_latency(sandbox, baseline_cmd: list[str], baseline_every: int) -> tuple[list[float], list[float]]:
    """`ROUNDS` exec round trips through the sandbox and one baseline run per `baseline_every`
    of them, in alternating blocks of `BLOCK` round trips (each followed by its baseline runs)."""
    persistent, baseline = [], []
    bar = tqdm(total=ROUNDS, desc="exec round trips", leave=False)
    for _ in range(ROUNDS // BLOCK):
        for _ in range(BLOCK):
            t = time.perf_counter()
            sandbox.exec("true")
            persistent.append(_ms(t))
        for _ in range(BLOCK // baseline_every):
            t = time.perf_counter()
            subprocess.run(baseline_cmd, check=True, capture_output=True)
            baseline.append(_ms(t))
        bar.update(BLOCK)
    bar.close()
    return persistent, baseline


def bench_local(small: Path, big: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    t = time.perf_counter()
    make_sandbox(SandboxSpec(workspace=small)).close()
    # The process's first start probes what the kernel allows and finds the compiled supervisor.
    figures["local_first_start_ms"] = _ms(t)
    starts = []
    for _ in tqdm(range(STARTS), desc="local starts", leave=False):
        t = time.perf_counter()
        make_sandbox(SandboxSpec(workspace=small)).close()
        starts.append(_ms(t))
    figures["local_start_p50_ms"] = percentile(starts, 50)
    sandbox = make_sandbox(SandboxSpec(workspace=small))
    baseline_cmd = sandbox.bwrap_args() + ["bash", "-c", "true"]  # same mounts, no supervisor
    persistent, fresh = _exec_latency(sandbox, baseline_cmd, baseline_every=1)
    sandbox.close()
    figures |= _exec_figures("local", persistent, "fresh_bwrap", fresh)
    t = time.perf_counter()
    parent = make_sandbox(SandboxSpec(workspace=big))
    figures["local_start_50mb_ms"] = _ms(t)
    with parent, LocalSandbox(SandboxSpec(workspace=big), layout="copy") as copying:
        overlay, copy, ahead, calls = [], [], [], []
        for _ in range(FORKS):  # interleaved
            overlay += _forks_once(parent)
            copy += _forks_once(copying)
            t = time.perf_counter()
            parent.prefork(1)
            calls.append(_ms(t))
            ahead += _forks_once(parent, busy_s=AHEAD_S)
    figures["local_fork_ms"] = percentile(overlay, 50)
    figures["local_fork_copy_baseline_ms"] = percentile(copy, 50)
    figures["local_fork_speedup"] = figures["local_fork_copy_baseline_ms"] / figures["local_fork_ms"]
    figures["local_fork_started_ahead_ms"] = percentile(ahead, 50)
    figures["local_prefork_call_ms"] = percentile(calls, 50)
    figures["local_fork_started_ahead_speedup"] = figures["local_fork_ms"] / figures["local_fork_started_ahead_ms"]
    return figures


def _exec_figures(backend: str, persistent: list[float], baseline: str, fresh: list[float]) -> dict[str, float]:
    """Exec latency through the sandbox's supervisor (p50, p99) against the baseline's (p50), and their ratio."""
    return {
        f"{backend}_exec_p50_ms": percentile(persistent, 50),
        f"{backend}_exec_p99_ms": percentile(persistent, 99),
        f"{baseline}_exec_p50_ms": percentile(fresh, 50),
        f"{backend}_exec_speedup_p50": percentile(fresh, 50) / percentile(persistent, 50),
    }


def _forks_once(parent, busy_s: float = 0.0) -> list[float]:
    """One fork's time, after the parent changed 10 files (and, with `busy_s`, went on with a
    command that long, as a caller does between a `prefork` and its fork)."""
    parent.exec("for j in 1 2 3 4 5 6 7 8 9 10; do echo $RANDOM > edit-$j.txt; done")
    if busy_s:
        parent.exec(f"sleep {busy_s}")
    t = time.perf_counter()
    child = parent.fork()
    elapsed = _ms(t)
    child.close()
    return [elapsed]


def bench_docker(small: Path, big: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    starts = []
    for _ in tqdm(range(STARTS), desc="docker starts", leave=False):
        t = time.perf_counter()
        make_sandbox(SandboxSpec(workspace=small), "docker").close()
        starts.append(_ms(t))
    figures["docker_start_p50_ms"] = percentile(starts, 50)
    with make_sandbox(SandboxSpec(workspace=small), "docker") as sandbox:
        cli = shutil.which("docker")
        if cli is None:
            raise RuntimeError("the docker CLI is not installed: no `docker exec` baseline")
        persistent, execs = _exec_latency(
            sandbox, [cli, "exec", sandbox.container_id, "true"], baseline_every=ROUNDS // CLI_ROUNDS
        )
    figures |= _exec_figures("docker", persistent, "docker_cli", execs)
    t = time.perf_counter()
    parent = make_sandbox(SandboxSpec(workspace=big), "docker")
    figures["docker_start_50mb_ms"] = _ms(t)  # includes baking the workspace image, unless cached
    with parent:
        figures["docker_fork_ms"] = percentile([t for _ in range(FORKS) for t in _forks_once(parent)], 50)
    figures["leaked_containers"], figures["leaked_before_reap"] = _episodes(small)
    return figures


EPISODE = """
import sys
from sandboxes import make_sandbox, SandboxSpec
with make_sandbox(SandboxSpec(workspace=sys.argv[1]), "docker") as sb:
    sb.exec("echo hello > out.txt && cat out.txt")
    sb.write_file("notes.txt", "episode")
    print("mid-command", flush=True)
    sb.exec(sys.argv[2], timeout=120)
    sb.exec("ls")
"""


def _episode(index: int, workspace: Path, env: dict[str, str]) -> bool:
    """One worker process, one episode; True if it was SIGKILLed mid-command."""
    killed = index % KILLED_EVERY == KILLED_EVERY - 1
    command = "sleep 60" if killed else "sleep 0.05"
    proc = subprocess.Popen(
        [sys.executable, "-c", EPISODE, str(workspace), command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if killed:
        proc.stdout.readline()
        time.sleep(0.2)  # well inside `sleep 60`
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    if not killed and proc.returncode != 0:
        raise RuntimeError(f"episode {index} failed: {err[-2000:]}")
    return killed


def _episodes(workspace: Path) -> tuple[int, int]:
    from sandboxes import reaper
    from sandboxes.docker_backend import client

    run = f"bench-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, AGENTIC_RL_RUN_ID=run)
    with ThreadPoolExecutor(WORKERS) as pool:
        jobs = [pool.submit(_episode, i, workspace, env) for i in range(EPISODES)]
        for job in tqdm(jobs, desc="episodes (5% SIGKILLed)"):
            job.result()
    mine = {"label": f"{reaper.LABEL}.owner-run={run}"}
    engine = client()
    before = len(engine.containers.list(all=True, filters=mine))
    print(reaper.reap(docker_client=engine))
    return len(engine.containers.list(all=True, filters=mine)), before


def main() -> None:
    from sandboxes.console import setup_logging

    setup_logging()
    args = arguments(
        "bench.perf.sandbox",
        "Sandbox latency, start, fork and leak figures for the local (bubblewrap) and docker backends. "
        "Measures exec latency through the persistent shell against a fresh `bwrap ... bash -c` "
        "(local) and a plain `docker exec` (docker) per command, sandbox start time (p50 of 10), "
        "a fork of a 50 MB workspace against a full `cp -a` copy, and containers leaked after 200 "
        "episodes with 5% of their workers SIGKILLed mid-command (then the reaper runs). Baselines "
        "are measured in the same run, interleaved (exec: blocks of 20 round trips, then the "
        "baseline's runs). Takes about 1-2 minutes on 2 cores without a Docker engine (the docker "
        "figures are then skipped) and about 10 minutes with one (the 200 leak episodes dominate).",
        "python -m bench.perf.sandbox --json /tmp/sandbox.json",
    )
    figures: dict[str, float | str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "small"
        small.mkdir()
        (small / "a.txt").write_text("a\n")
        print("preparing a 50 MB workspace in 5,000 files ...", flush=True)
        big = _workspace(Path(tmp) / "big", files=5000, total_bytes=50 * 1024 * 1024)
        figures |= bench_local(small, big)
        problem = docker_problem()
        if problem:
            figures["docker_skipped"] = problem
        else:
            figures |= bench_docker(small, big)
    figures |= {"rounds": ROUNDS, "episodes": EPISODES}
    report("bench.perf.sandbox (local and docker backends)", figures, args.json)


if __name__ == "__main__":
    main()
