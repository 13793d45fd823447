"""Sandbox density: N concurrent idle-then-busy sandboxes per backend, and the cost curve as N grows.

For each arm (`local`; `docker` when an engine answers; `--arms` adds variants) and each N in
`--sizes` (1, 8, 32, 128), one round:
1. start: N sandboxes at once (one thread each, released together by a barrier) over a
   built-in task's prepared workspace, as `ToolEnv.reset` starts one (`sandbox_spec_for`):
   seconds per sandbox (p50/p99) and until the last one answered;
2. idle: they sit `--idle` seconds; then memory per sandbox: the PSS (proportional set
   size, /proc/PID/smaps_rollup: shared pages split among their users, the fair figure for
   many copies of one program) of each sandbox's host process tree: bubblewrap, supervisor
   and shell (local), or containerd-shim, supervisor and shell (docker); docker adds the
   container's cgroup memory (page cache included) and the engine's growth (dockerd and
   containerd) divided by N;
3. busy: all at once, each runs `--rounds` times a script of real commands (git status,
   write a file, read it back, the task's visible unit tests, a grep, `true`): latency
   p50/p99 over every operation of every sandbox, under that concurrency; memory again;
   storage per sandbox: the bytes only it holds (local: its workspace layers, or its copy,
   and its upper tmpfs; docker: the container's writable layer);
4. close all at once; then the leak check: processes this process started, its sandbox
   directories in the temp folder, and its containers, still there after the round.
Errors (a start, a command or a close that failed, anything leaked) are counted; the largest
N is the largest size up to which every round ran clean. After a round with errors the arm
stops growing N.

Baseline: N=1 of the same arm in the same run. Each figure at N is also given as a ratio to
it (start p50, exec p50/p99, memory per sandbox). Rounds go size by size, every arm in turn,
so that the load of the moment (a shared machine) hits the arms alike. The projection (a
projection, not a measurement) prices 1000 sandboxes running this script at the rates
measured with N=1 and with the largest clean N: sandbox-seconds (the mean of start + busy
script + close per sandbox, times 1000), wall time in waves of N, and memory and storage
were all 1000 held at once.

Over 450 lines on purpose: one benchmark, read top to bottom: the measuring tools (PSS,
disk, leaks), the two backends' arms, one round and its report. Its helpers serve no other
module, so splitting them out would only make a reader jump between files.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm import tqdm

from bench.common import RESULTS, docker_problem, percentile, report

SIZES = (1, 8, 32, 128)
IDLE_S = 2.0
BUSY_ROUNDS = 2
PROJECTED = 1000
LEAK_GRACE_S = 5.0
DEFAULT_TASK = "collections-indexed-heap-reprioritize"
MB = 1024 * 1024
ARMS = {
    "local": "the local backend as it starts by default (overlay layout: one shared, idmapped base layer per workspace)",
    "local-private": "the overlay layout with a private base layer per sandbox: a copy of the workspace, chowned "
    "to its uid (the layout before shared base layers; where idmapped mounts are unavailable, still the default)",
    "local-copy": "the copy layout (what a host that is not root gets): the workspace copied onto a tmpfs per sandbox",
    "docker": "the docker backend (a container per sandbox; the workspace baked into an image once)",
}
ENGINE_PROCESSES = ("dockerd", "containerd")


# -- figures (pure: tested on fixed inputs) ------------------------------------------------
def summary(values: list[float]) -> tuple[float, float]:
    """p50 and p99 of `values` (bench.common's nearest-rank percentile)."""
    return percentile(values, 50), percentile(values, 99)


def ratios(figures: dict[str, float], arm: str, sizes: Iterable[int], baseline: int = 1) -> dict[str, float]:
    """Each size's start p50, exec p50/p99 and memory per sandbox over the baseline size's,
    for the sizes whose round and the baseline's have the figure."""
    out: dict[str, float] = {}
    base = f"{arm}_n{baseline}_"
    for n in sizes:
        if n == baseline:
            continue
        at = f"{arm}_n{n}_"
        for name in ("start_p50_ms", "exec_p50_ms", "exec_p99_ms", "mem_mb"):
            if at + name in figures and figures.get(base + name):
                out[f"{at}{name.removesuffix('_ms').removesuffix('_mb')}_ratio"] = (
                    figures[at + name] / figures[base + name]
                )
    return out


def largest_clean(errors_by_size: dict[int, int]) -> int:
    """The largest N up to which every measured round ran without errors (0: not even the smallest)."""
    largest = 0
    for n in sorted(errors_by_size):
        if errors_by_size[n]:
            break
        largest = n
    return largest


def projection(n: int, per_sandbox_s: list[float], round_wall_s: float, count: int = PROJECTED) -> dict[str, float]:
    """What `count` sandboxes running the bench's script would cost at the rates of a round
    of `n` at once (a projection): sandbox-seconds (the mean lifetime, start + busy + close,
    times `count`: lifetimes add up, so the mean is the right average) and wall time in
    waves of `n`."""
    return {
        f"projected_{count}_sandbox_seconds": count * sum(per_sandbox_s) / len(per_sandbox_s),
        f"projected_{count}_wall_s": math.ceil(count / n) * round_wall_s,
    }


def projected_footprint(
    mem_mb: float, storage_mb: float, count: int = PROJECTED, memory_total_mb: float | None = None
) -> dict[str, float]:
    """Memory and storage were `count` sandboxes held at once, at a measured size per
    sandbox (a projection); whether that memory fits in `memory_total_mb`."""
    figures = {
        f"projected_{count}_concurrent_mem_gb": count * mem_mb / 1024,
        f"projected_{count}_storage_gb": count * storage_mb / 1024,
    }
    if memory_total_mb:
        figures[f"projected_{count}_concurrent_fits_ram"] = int(count * mem_mb <= memory_total_mb)
    return figures


def leaks(before: dict[str, set], after: dict[str, set]) -> dict[str, int]:
    """How many things of each kind are in `after` and were not in `before`."""
    return {kind: len(after[kind] - before.get(kind, set())) for kind in after}


def descendants(root: int, parents: dict[int, int]) -> list[int]:
    """`root` and every process below it, given each pid's parent."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def parse_pss_kb(smaps_rollup: str) -> int:
    """The Pss line of /proc/PID/smaps_rollup, in kB."""
    for line in smaps_rollup.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise ValueError("no Pss line")


# -- /proc ----------------------------------------------------------------------------------
def process_parents() -> dict[int, int]:
    """pid -> parent pid of every process now."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{entry}/stat", "rb") as f:
                parents[int(entry)] = int(f.read().rsplit(b")", 1)[1].split()[1])
    return parents


def pss_mb(pids: Iterable[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):  # gone meanwhile: it holds nothing now
            total += parse_pss_kb(Path(f"/proc/{pid}/smaps_rollup").read_text())
    return total / 1024


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _statvfs_used(path: str) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _du(path: Path) -> int:
    total = 0
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


# -- arms -------------------------------------------------------------------------------------
@dataclass
class Arm:
    """A backend (and layout) to measure: how to start a sandbox, and what one holds on the host."""

    name: str
    start: Callable[[object], object]
    roots: Callable[[list], list[int]]
    """The host pids whose process trees are the sandboxes' (one per sandbox)."""
    storage: Callable[[list], int]
    """Bytes on disk or tmpfs that only these sandboxes hold, all together."""
    extra: Callable[[list], dict[str, float]] = lambda sandboxes: {}


def local_arm(name: str = "local", layout: str | None = None, **options: object) -> Arm:
    from sandboxes.local import LocalSandbox

    def start(spec):
        return LocalSandbox(spec, layout=layout, **options)

    def storage(sandboxes) -> int:
        layers, writable = set(), 0
        for sb in sandboxes:
            folders, tmpfs = sb.footprint()
            layers |= set(folders)  # a layer shared by several sandboxes counts once
            writable += _statvfs_used(str(tmpfs))
        return sum(_du(p) for p in layers) + writable

    return Arm(name, start, lambda sandboxes: [sb.host_pid for sb in sandboxes], storage)


def docker_arm() -> Arm:
    from sandboxes import make_sandbox
    from sandboxes.docker_backend import client

    def roots(sandboxes) -> list[int]:
        # The container's main process (its supervisor) and above it its containerd-shim,
        # which exists for this container alone: the shim's tree is the sandbox's.
        found = []
        parents = process_parents()
        for sb in sandboxes:
            init = client().api.inspect_container(sb.container_id)["State"]["Pid"]
            found.append(parents.get(init, init) if _comm(parents.get(init, 0)).startswith("containerd-shim") else init)
        return found

    def storage(sandboxes) -> int:
        ids = {sb.container_id for sb in sandboxes}
        rows = client().api.containers(all=True, size=True, filters={"label": _owner_label()})
        return sum(row.get("SizeRw") or 0 for row in rows if row["Id"] in ids)

    def extra(sandboxes) -> dict[str, float]:
        cgroup = 0
        for sb in sandboxes:
            for path in (
                f"/sys/fs/cgroup/memory/docker/{sb.container_id}/memory.usage_in_bytes",  # v1
                f"/sys/fs/cgroup/docker/{sb.container_id}/memory.current",  # v2, cgroupfs driver
                f"/sys/fs/cgroup/system.slice/docker-{sb.container_id}.scope/memory.current",  # v2, systemd
            ):
                with contextlib.suppress(OSError, ValueError):
                    cgroup += int(Path(path).read_text())
                    break
        return {"cgroup_mb": cgroup / MB / max(1, len(sandboxes))}

    return Arm("docker", lambda spec: make_sandbox(spec, "docker"), roots, storage, extra)


def engine_mb() -> float:
    """PSS of the docker engine's own processes (dockerd, containerd; not the shims)."""
    return pss_mb(pid for pid in process_parents() if _comm(pid) in ENGINE_PROCESSES)


def _owner_label() -> str:
    from sandboxes import reaper

    return f"{reaper.LABEL}.owner-pid={os.getpid()}"


# -- the leak check ---------------------------------------------------------------------------
def snapshot(with_docker: bool) -> dict[str, set]:
    """What this process owns now: processes below it, sandbox folders it made in the temp
    folder, and (with docker) containers labelled with it."""
    me = os.getpid()
    owned = {
        "processes": set(descendants(me, process_parents())) - {me},
        "temp_dirs": set(),
    }
    tmp = Path(tempfile.gettempdir())
    for path in tmp.glob("sandbox-*"):
        with contextlib.suppress(OSError, ValueError, TypeError):
            if json.loads((path / ".owner.json").read_text()).get("pid") == str(me):
                owned["temp_dirs"].add(path.name)
    if with_docker:
        from sandboxes.docker_backend import client

        rows = client().api.containers(all=True, filters={"label": _owner_label()})
        owned["containers"] = {row["Id"] for row in rows}
    return owned


def leak_check(before: dict[str, set], with_docker: bool, grace_s: float = LEAK_GRACE_S) -> dict[str, int]:
    """`leaks` after the round, given a few seconds for things on their way out."""
    deadline = time.monotonic() + grace_s
    while True:
        found = leaks(before, snapshot(with_docker))
        if not any(found.values()) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


# -- one round ------------------------------------------------------------------------------
@dataclass
class Round:
    arm: str
    n: int
    starts_s: list[float] = field(default_factory=list)
    start_wall_s: float = 0.0
    ops_ms: list[float] = field(default_factory=list)
    busy_s: list[float] = field(default_factory=list)
    """Seconds each sandbox spent in its busy script."""
    busy_wall_s: float = 0.0
    closes_s: list[float] = field(default_factory=list)
    close_wall_s: float = 0.0
    mem_idle_mb: float = 0.0
    mem_mb: float = 0.0
    storage_mb: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    leaked: dict[str, int] = field(default_factory=dict)

    @property
    def error_count(self) -> int:
        return len(self.errors) + sum(self.leaked.values())

    def figures(self) -> dict[str, float]:
        at = f"{self.arm}_n{self.n}_"
        out: dict[str, float] = {f"{at}errors": self.error_count}
        if self.starts_s:
            p50, p99 = summary(self.starts_s)
            out |= {f"{at}start_p50_ms": p50 * 1000, f"{at}start_p99_ms": p99 * 1000}
            out[f"{at}start_all_s"] = self.start_wall_s
        if self.ops_ms:
            p50, p99 = summary(self.ops_ms)
            out |= {f"{at}exec_p50_ms": p50, f"{at}exec_p99_ms": p99, f"{at}ops": len(self.ops_ms)}
            out[f"{at}busy_ops_per_s"] = len(self.ops_ms) / self.busy_wall_s if self.busy_wall_s else 0.0
        if self.mem_mb:
            out |= {f"{at}mem_idle_mb": self.mem_idle_mb, f"{at}mem_mb": self.mem_mb}
            out[f"{at}storage_mb"] = self.storage_mb
        out |= {f"{at}{k}": v for k, v in self.extra.items()}
        if self.closes_s:
            out[f"{at}close_all_s"] = self.close_wall_s
        out |= {f"{at}leaked_{k}": v for k, v in self.leaked.items() if v}
        return out

    def lifetimes_s(self) -> list[float]:
        """Start + busy script + close of each sandbox that did all three."""
        return [s + b + c for s, b, c in zip(self.starts_s, self.busy_s, self.closes_s, strict=False)]


def busy_script(index: int, test_command: str | None) -> list[tuple[str, str, str]]:
    """(kind, argument, what a correct answer contains) for one sandbox's busy phase."""
    note = f"density/note-{index}.txt"
    script = [
        ("exec", "git status --short | wc -l && git rev-parse --short HEAD", ""),
        ("write", note, f"sandbox {index}\n" * 256),
        ("read", note, f"sandbox {index}\n" * 256),
    ]
    if test_command:
        script.append(("exec", test_command, ""))
    script += [("exec", "grep -rn 'def ' --include='*.py' . | wc -l", ""), ("exec", "true", "")]
    return script


class Stopped(Exception):
    """The round was interrupted."""


def run_round(
    arm: Arm,
    n: int,
    spec,
    test_command: str | None,
    idle_s: float,
    rounds: int,
    stop: threading.Event,
    with_docker: bool,
) -> Round:
    result = Round(arm.name, n)
    before = snapshot(with_docker)
    lock = threading.Lock()
    opened: list = []
    engine_before = engine_mb() if arm.name == "docker" else 0.0

    def start_one(index: int, barrier: threading.Barrier) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()
        if stop.is_set():
            return
        t = time.perf_counter()
        try:
            sandbox = arm.start(spec)
        except Exception as exc:  # counted, not fatal: this is what the round measures
            with lock:
                result.errors.append(f"start {index}: {exc}")
            return
        elapsed = time.perf_counter() - t
        with lock:
            if stop.is_set():
                sandbox.close()
                return
            opened.append(sandbox)
            result.starts_s.append(elapsed)

    def busy_one(index: int, sandbox, barrier: threading.Barrier) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()
        spent = 0.0
        for _ in range(rounds):
            for kind, arg, expected in busy_script(index, test_command):
                if stop.is_set():
                    return
                t = time.perf_counter()
                try:
                    if kind == "exec":
                        out = sandbox.exec(arg)
                        problem = None if out.ok else f"exit {out.exit_code}: {out.output[-200:]!r}"
                    elif kind == "write":
                        sandbox.write_file(arg, expected)
                        problem = None
                    else:
                        data = sandbox.read_file(arg).decode()
                        problem = None if data == expected else f"read back {len(data)} bytes, wrote {len(expected)}"
                except Exception as exc:
                    problem = str(exc)
                elapsed = time.perf_counter() - t
                spent += elapsed
                with lock:
                    result.ops_ms.append(elapsed * 1000)
                    if problem:
                        result.errors.append(f"sandbox {index} {kind} {arg[:60]!r}: {problem}")
        with lock:
            result.busy_s.append(spent)

    def close_one(sandbox) -> None:
        t = time.perf_counter()
        try:
            sandbox.close()
        except Exception as exc:
            with lock:
                result.errors.append(f"close: {exc}")
            return
        with lock:
            result.closes_s.append(time.perf_counter() - t)

    def all_at_once(pool: ThreadPoolExecutor, jobs: list[tuple], what: str) -> float:
        barrier = threading.Barrier(len(jobs) + 1)
        try:
            futures = [pool.submit(fn, *args, barrier) for fn, *args in jobs]
            barrier.wait()
            t = time.perf_counter()
            for future in tqdm(futures, desc=f"{arm.name} N={n}: {what}", leave=False, disable=n < 8):
                while not future.done():  # a short wait, so that Ctrl-C gets through
                    with contextlib.suppress(TimeoutError):
                        future.result(timeout=0.2)
                future.result()
            return time.perf_counter() - t
        except BaseException:
            barrier.abort()  # threads still waiting for the others give up
            raise

    pool = ThreadPoolExecutor(max_workers=max(1, n))
    try:
        result.start_wall_s = all_at_once(pool, [(start_one, i) for i in range(n)], "start")
        if stop.is_set():
            raise Stopped
        time.sleep(idle_s)
        result.mem_idle_mb = pss_mb(_trees(arm.roots(opened))) / max(1, len(opened))
        engine_after = engine_mb() if arm.name == "docker" else 0.0
        result.busy_wall_s = all_at_once(pool, [(busy_one, i, sb) for i, sb in enumerate(opened)], "busy")
        result.mem_mb = pss_mb(_trees(arm.roots(opened))) / max(1, len(opened))
        result.storage_mb = arm.storage(opened) / MB / max(1, len(opened))
        result.extra = arm.extra(opened)
        if arm.name == "docker":
            result.extra["engine_mb"] = (engine_after - engine_before) / max(1, len(opened))
    finally:
        stop_after = stop.is_set()
        stop.set()  # late starters close their own sandbox
        with lock:
            closing, opened[:] = list(opened), []
        t = time.perf_counter()
        list(pool.map(close_one, closing))
        result.close_wall_s = time.perf_counter() - t
        pool.shutdown(wait=True, cancel_futures=True)
        if not stop_after:
            stop.clear()
    result.leaked = leak_check(before, with_docker)
    return result


def _trees(roots: list[int]) -> list[int]:
    parents = process_parents()
    return [pid for root in roots for pid in descendants(root, parents)]


# -- the table --------------------------------------------------------------------------------
def _cell(figures: dict, key: str, fmt: str = ".1f") -> str:
    return format(figures[key], fmt) if key in figures else "-"


def markdown(figures: dict[str, float], arms: list[str], sizes: list[int]) -> str:
    """The cost curve: one row per arm and N."""
    head = (
        "| arm | N | start p50 / p99 ms | start all s | exec p50 / p99 ms | mem/sandbox MB (idle) | "
        "storage/sandbox MB | errors | ratio to N=1: start p50, exec p50, exec p99, mem |"
    )
    rows = [head, "|" + "---|" * 9]
    for arm in arms:
        if f"{arm}_skipped" in figures:
            rows.append(f"| {arm} | - | skipped: {figures[f'{arm}_skipped']} |||||||")
            continue
        for n in sizes:
            at = f"{arm}_n{n}_"
            if f"{at}errors" not in figures:
                continue
            cell = {key[len(at) :]: value for key, value in figures.items() if key.startswith(at)}
            ratio = ", ".join(_cell(cell, f"{k}_ratio", ".2f") for k in ("start_p50", "exec_p50", "exec_p99", "mem"))
            rows.append(
                f"| {arm} | {n} | {_cell(cell, 'start_p50_ms', '.0f')} / {_cell(cell, 'start_p99_ms', '.0f')} "
                f"| {_cell(cell, 'start_all_s', '.2f')} | {_cell(cell, 'exec_p50_ms')} / {_cell(cell, 'exec_p99_ms')} "
                f"| {_cell(cell, 'mem_mb')} ({_cell(cell, 'mem_idle_mb')}) | {_cell(cell, 'storage_mb', '.2f')} "
                f"| {int(cell['errors'])} | {ratio if n != min(sizes) else 'baseline'} |"
            )
    return "\n".join(rows)


def memory_total_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- main -------------------------------------------------------------------------------------
def _arms(names: list[str]) -> tuple[list[Arm], dict[str, str]]:
    arms, skipped = [], {}
    for name in names:
        if name == "local":
            from sandboxes.local import bwrap_available

            if problem := bwrap_available():
                skipped[name] = problem
            else:
                arms.append(local_arm())
        elif name == "local-private":
            arms.append(local_arm(name, layout="overlay", share_base=False))
        elif name == "local-copy":
            arms.append(local_arm(name, layout="copy"))
        elif name == "docker":
            problem = docker_problem()
            if problem:
                skipped[name] = problem
            else:
                arms.append(docker_arm())
        else:
            raise SystemExit(f"bench.perf.density: unknown arm {name!r} (known: {', '.join(ARMS)})")
    return arms, skipped


def padded_workspace(source: Path, target: Path, pad_mb: int) -> Path:
    """A copy of `source` with `pad_mb` MB more in 20 files per MB under pad/ (a stand-in
    for a real repository's size), deterministic content."""
    shutil.copytree(source, target, symlinks=True)
    rng = random.Random(0)
    for i in range(pad_mb * 20):
        folder = target / "pad" / f"d{i % 50}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.bin").write_bytes(rng.randbytes(MB // 20))
    return target


def measure(
    arms: list[Arm],
    sizes: list[int],
    task_id: str,
    idle_s: float,
    rounds: int,
    done: list[Round],
    pad_mb: int = 0,
) -> None:
    """Run every round, appending each finished one to `done` (kept when interrupted)."""
    from agent_env.gold import visible_test_command
    from agent_env.grading import sandbox_spec_for
    from tasks import builtin_tasks

    (task,) = builtin_tasks([task_id])
    spec = sandbox_spec_for(task)
    test_command = visible_test_command(task)
    with tempfile.TemporaryDirectory(prefix="density-") as tmp:
        if pad_mb:
            print(f"padding the workspace with {pad_mb} MB ...", flush=True)
            spec = replace(spec, workspace=padded_workspace(spec.workspace, Path(tmp) / "workspace", pad_mb))
        _measure(arms, sizes, spec, test_command, idle_s, rounds, done)


def _measure(arms: list[Arm], sizes: list[int], spec, test_command, idle_s, rounds, done: list[Round]) -> None:
    stop = threading.Event()
    for arm in arms:
        print(f"{arm.name}: warm-up start (docker bakes the workspace image once) ...", flush=True)
        arm.start(spec).close()
    failed: set[str] = set()
    # Size by size, every arm in turn: the machine's load of the moment hits them alike.
    for n in sizes:
        for arm in arms:
            if arm.name in failed:
                continue
            print(f"{arm.name}: N={n} ...", flush=True)
            t = time.perf_counter()
            finished = run_round(arm, n, spec, test_command, idle_s, rounds, stop, arm.name == "docker")
            done.append(finished)
            print(
                f"{arm.name}: N={n} done in {time.perf_counter() - t:.1f} s, {finished.error_count} error(s)"
                + (f"; first: {finished.errors[0][:300]}" if finished.errors else "")
                + (f"; leaked {finished.leaked}" if any(finished.leaked.values()) else ""),
                flush=True,
            )
            if finished.error_count:
                print(f"{arm.name}: stops growing N after errors at N={n}", flush=True)
                failed.add(arm.name)


def figures_of(done: list[Round], arm_names: list[str], sizes: list[int], skipped: dict[str, str]) -> dict:
    figures: dict[str, float | str] = {}
    for finished in done:
        figures |= finished.figures()
    for arm in arm_names:
        if arm in skipped:
            figures[f"{arm}_skipped"] = skipped[arm]
            continue
        rounds = {r.n: r for r in done if r.arm == arm}
        if not rounds:
            continue
        figures |= ratios(figures, arm, sizes, baseline=min(rounds))
        largest = largest_clean({n: r.error_count for n, r in rounds.items()})
        figures[f"{arm}_largest_clean_n"] = largest
        # Time at the baseline's rates (one at a time: the fewest sandbox-seconds, the longest
        # wall time) and at the largest clean N's (the most at once); memory and storage at
        # the largest clean N's sizes (the most sharing measured: what 1000 at once come nearest).
        for n in sorted({min(rounds), largest} - {0}):
            at = rounds[n]
            if at.lifetimes_s():
                projected = projection(n, at.lifetimes_s(), at.start_wall_s + at.busy_wall_s + at.close_wall_s)
                if n == largest:
                    projected |= projected_footprint(at.mem_mb, at.storage_mb, memory_total_mb=memory_total_mb())
                figures |= {f"{arm}_{k}_at_n{n}": v for k, v in projected.items()}
    return figures


def main() -> None:
    from sandboxes.console import interrupted, interrupts, setup_logging

    setup_logging()
    args = _parse(
        "Sandbox density: for each backend (local; docker when an engine answers, else skipped "
        "with the reason) and each N (--sizes, default 1,8,32,128), starts N sandboxes at once over "
        "a built-in task's workspace, lets them idle, then makes them all busy at once (git, a file "
        "written and read back, the task's unit tests, a grep, `true`). Reports start time p50/p99, "
        "exec latency p50/p99 under that concurrency, memory per sandbox (PSS of its host process "
        "tree; docker also its cgroup and the engine's growth), storage per sandbox, errors and "
        "leaks after close, and the largest N held without errors. Baseline: N=1 in the same run; "
        "figures at N are also ratios to it; arms run in turn at each N. Then a projection (not a "
        "measurement) of a 1000-sandbox run at the rates of N=1 and of the largest clean N. Takes "
        "about 75 s on 2 cores with docker (the docker arm is most of it; about 30 s without), "
        "about 2 minutes with --arms local,local-private,local-copy,docker.",
        "python -m bench.perf.density --sizes 1,8,32 --arms local,docker --json /tmp/density.json",
    )
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    names = [a for a in args.arms.split(",") if a]
    arms, skipped = _arms(names)
    notes: dict[str, float] = {}
    if any(arm.name == "local" for arm in arms):
        from sandboxes.local import shared_base_available

        # Whether the "local" arm's sandboxes shared their base layer (else each copied it).
        notes["local_shared_base"] = int(shared_base_available())
    done: list[Round] = []
    with interrupts():
        try:
            measure(arms, sizes, args.task, args.idle, args.rounds, done, args.pad_mb)
        except KeyboardInterrupt as exc:
            _finish(done, names, sizes, skipped, args.json, notes | {"interrupted": 1})
            sys.exit(interrupted(exc, f"rounds finished ({len(done)}) written to {args.json}"))
    _finish(done, names, sizes, skipped, args.json, notes)


def _parse(description: str, example: str) -> argparse.Namespace:
    """bench.common's options (--json) and this bench's own."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.perf.density", description=description, epilog=f"example: {example}"
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "density.json", help="where to write the figures")
    parser.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="numbers of sandboxes at once, comma-separated"
    )
    parser.add_argument(
        "--arms",
        default="local,docker",
        help="comma-separated; " + "; ".join(f"{name}: {what}" for name, what in ARMS.items()),
    )
    parser.add_argument(
        "--task", default=DEFAULT_TASK, help="the built-in task whose workspace the sandboxes start from"
    )
    parser.add_argument(
        "--idle", type=float, default=IDLE_S, help="seconds the sandboxes sit idle before the busy phase"
    )
    parser.add_argument("--rounds", type=int, default=BUSY_ROUNDS, help="times each sandbox runs the busy script")
    parser.add_argument(
        "--pad-mb", type=int, default=0, help="add this many MB (20 files per MB) to the workspace: a larger repository"
    )
    return parser.parse_args()


def _finish(
    done: list[Round], names: list[str], sizes: list[int], skipped: dict[str, str], path: Path, notes: dict
) -> None:
    figures = figures_of(done, names, sizes, skipped)
    figures |= notes | {"sizes": ",".join(map(str, sizes))}
    print(markdown(figures, names, sizes))
    print(
        f"\n*_projected_{PROJECTED}_*_at_nN: a projection, not a measurement: {PROJECTED} sandboxes running "
        "this script at the rates measured with N at once (N=1 and each arm's largest clean N)"
    )
    report("bench.perf.density (sandboxes per machine)", figures, path)


if __name__ == "__main__":
    main()
