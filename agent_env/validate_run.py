"""A resumable validation run kept in a folder: every row of a dataset graded, gold and empty.

`python -m agent_env validate verified --repo-cache DIR --out RUN` validates each task (see
`agent_env.validate`) and appends its verdict to `RUN/results.jsonl` the moment it is known
(one line, one `write`), so a rerun of the same command, after Ctrl-C, a crash or a reboot,
skips every task already there and goes on with the rest. Tasks run spec by spec (SWE-bench's
(repo, version) environments, `agent_env.environments`): a spec's environment is built when its
first task comes up, once, and its tasks then run one after another, so a stop loses at most
the task in flight (and the spec's build, whose finished parts are cached).

`--shard I/N` takes the I-th of N contiguous slices of the selection in spec order (each spec
lands in one or two shards, so a shard builds few environments): N machines, or N Ray
workers, run one shard each, into one folder (lines from several processes append whole) or
into several whose `results.jsonl` files are concatenated; a run with nothing left to do only
rewrites the tables.

Each time, `RUN/table.md` (a row per task: verdict, FAIL_TO_PASS / PASS_TO_PASS counts,
environment seconds, test seconds, why a task is not `ok`) and `RUN/summary.md` (by
repository and by (repository, version), rows per hour with the environments built in the run
and with them already built, and the disk the environment and workspace caches take) are
written from every line of `results.jsonl`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from agent_env.environments import prepare_environments, shared_key
from agent_env.validate import TaskValidation, validate_task
from sandboxes import make_sandbox
from tasks import Task

log = logging.getLogger(__name__)

RESULTS = "results.jsonl"
TABLE = "table.md"
SUMMARY = "summary.md"
VERDICTS = {"ok": "ok", "failed": "FAIL", "unavailable": "n/a"}


@dataclass(frozen=True)
class RowRecord:
    """One task's line in `results.jsonl`: its verdict (`ok`, `failed`, `unavailable`), why
    it is not `ok` (`reason`), its required-test counts, and where the time went
    (`env_seconds`: preparing its environment, building the spec's shared part when this
    task was the first of its spec in the run (`env_built`); `test_seconds`: grading the
    gold and the empty patch)."""

    task_id: str
    repo: str
    version: str
    status: str
    fail_to_pass: int
    pass_to_pass: int
    env_seconds: float
    env_built: bool
    test_seconds: float
    reason: str = ""
    log: str = ""
    finished_at: float = 0.0
    graded_by: str = ""
    """The grader's code: `git describe` of this checkout (`code_version`), so a run that
    spans several versions of the grader (a long run, resumed after fixes) says which
    verdict came from which."""

    @classmethod
    def of(
        cls, task: Task, result: TaskValidation, env_seconds: float, env_built: bool, graded_by: str = ""
    ) -> RowRecord:
        reason = "; ".join(result.problems) if result.status == "failed" else result.reason
        spec = task.harness_spec or {}
        return cls(
            task_id=task.id,
            repo=task.repo or spec.get("repo", "") or "(authored)",
            version=str(spec.get("version", "")),
            status=result.status,
            fail_to_pass=len(task.grading.fail_to_pass),
            pass_to_pass=len(task.grading.pass_to_pass),
            env_seconds=round(env_seconds, 2),
            env_built=env_built,
            test_seconds=round(result.seconds, 2),
            reason=reason,
            log=result.log,
            finished_at=round(time.time(), 1),
            graded_by=graded_by,
        )


def code_version() -> str:
    """This checkout's commit (12 digits; `-dirty` when tracked files differ from it), or the
    installed package's version where the code is not a git checkout."""
    root = str(Path(__file__).resolve().parents[1])

    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None

    head = git("rev-parse", "--short=12", "HEAD")
    if head is not None and head.returncode == 0 and head.stdout.strip():
        changed = git("diff", "--quiet", "HEAD", "--")
        return head.stdout.strip() + ("-dirty" if changed is not None and changed.returncode == 1 else "")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"agentic-rl {version('agentic-rl')}"
    except PackageNotFoundError:
        return "unknown"


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` (1 <= I <= N) as (I, N); a ValueError that says what to write otherwise."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: write I/N, e.g. 2/4 for the second of four slices") from None
    if not 1 <= index <= count:
        raise ValueError(f"--shard {text}: I must be between 1 and N, e.g. 1/{max(count, 1)}")
    return index, count


def spec_groups(tasks: Iterable[Task], backend: str) -> list[list[Task]]:
    """The tasks grouped by the shared part of their environment (first appearance first),
    in their own order within a group."""
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        groups.setdefault(shared_key(task, backend), []).append(task)
    return list(groups.values())


def spec_order(tasks: Iterable[Task], backend: str) -> list[Task]:
    """The order a run builds and grades tasks in: `spec_groups`, one after another."""
    return [task for group in spec_groups(tasks, backend) for task in group]


def shard(tasks: list[Task], index: int, count: int) -> list[Task]:
    """The `index`-th (from 1) of `count` contiguous, near-equal slices of `tasks`."""
    start, stop = (len(tasks) * (index - 1)) // count, (len(tasks) * index) // count
    return tasks[start:stop]


def read_records(path: Path) -> list[RowRecord]:
    """Every whole line of a `results.jsonl`; the last verdict of a task counts. A torn or
    foreign line (a crash mid-write, an edit) is skipped with a warning naming it."""
    if not path.exists():
        return []
    names = {f.name for f in fields(RowRecord)}
    records: dict[str, RowRecord] = {}
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            record = RowRecord(**{k: v for k, v in data.items() if k in names})
        except (ValueError, TypeError) as exc:
            log.warning("%s:%d: not a verdict line, skipped (%s); its task runs again", path, number, exc)
            continue
        records[record.task_id] = record
    return list(records.values())


def append_record(path: Path, record: RowRecord) -> None:
    """One line, written with one `write` on an O_APPEND file and synced: shards appending to
    the same file never interleave, and a crash leaves whole lines."""
    line = (json.dumps(asdict(record), sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def finished_ids(out: Path, redo: frozenset[str] = frozenset()) -> frozenset[str]:
    """The tasks a run into `out` has a verdict for that `redo` does not ask again: `run`
    skips them, and their workspaces need not be made (`tasks.load_sources`' `no_checkout`)."""
    return frozenset(r.task_id for r in read_records(out / RESULTS) if r.status not in redo)


def eta(done: int, remaining: int, seconds: float) -> str:
    """Time left at the pace so far, as `1h05m`, `4m10s` or `?` before the first task."""
    if done == 0:
        return "?"
    left = int(seconds / done * remaining)
    hours, rest = divmod(left, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def run(
    tasks: list[Task],
    out: Path,
    backend: str = "local",
    *,
    build_workers: int | None = None,
    log_dir: Path | None = None,
    on_result: Callable[[TaskValidation, str], None] | None = None,
    prune: bool = False,
    redo: frozenset[str] = frozenset(),
) -> list[RowRecord]:
    """Validate each of `tasks` not yet in `out/results.jsonl`, spec by spec, appending each
    verdict as it comes (each task's log in `log_dir`, default `out/logs`);
    `on_result(verdict, progress)` is told of each (progress: `[k/n, ETA ...]`). Returns this
    run's records; the tables are rewritten from the whole file, also after Ctrl-C (the
    interrupt then goes on up, and the caches' disk use, which takes a `du` over every
    environment, is left out so that the stop takes seconds). `prune`: once a task's verdict
    is written, its own files are deleted (`owned_paths`): the disk holds the specs' shared
    environments and one task's own, not every task's (a django row's own copy is ~0.2 GB).
    `redo`: verdicts (`failed`, `unavailable`) graded again, e.g. after a fix to their
    environment; the new verdict is appended and is the one that counts."""
    out.mkdir(parents=True, exist_ok=True)
    results = out / RESULTS
    finished = finished_ids(out, redo)
    groups = spec_groups((t for t in tasks if t.id not in finished), backend)
    todo = [task for group in groups for task in group]
    if finished:
        log.info("%s: %d of %d tasks done already; %d to go", results, len(tasks) - len(todo), len(tasks), len(todo))
    factory = None if backend == "local" else (lambda spec: make_sandbox(spec, backend))
    records: list[RowRecord] = []
    graded_by = code_version()
    started = time.monotonic()
    stopped = True
    try:
        for number, group in enumerate(groups):
            env_seconds: dict[str, float] = {}
            built: set[str] = set()
            prepared = prepare_environments(
                group, backend, workers=build_workers, seconds=env_seconds, built=built, progress=False
            )
            pairs = list(zip(group, prepared, strict=True))
            later = [task for rest in groups[number + 1 :] for task in rest]
            for index, (original, task) in enumerate(pairs):
                result = validate_task(task, factory, log_dir or out / "logs")
                record = RowRecord.of(task, result, env_seconds.get(task.id, 0.0), task.id in built, graded_by)
                append_record(results, record)
                records.append(record)
                if prune:
                    for path in prunable((original, task), pairs[index + 1 :], later):
                        shutil.rmtree(path, ignore_errors=True)
                if on_result is not None:
                    remaining = len(todo) - len(records)
                    spent = time.monotonic() - started
                    on_result(result, f"[{len(records)}/{len(todo)}, ETA {eta(len(records), remaining, spent)}]")
        stopped = False
    finally:
        write_tables(out, measure_disk=not stopped)
    return records


def owned_paths(original: Task, prepared: Task) -> list[Path]:
    """The cached folders that belong to one task alone: its workspace made from a clone
    (`workspaces/git/...`) and its own environment copy (`envs/ws-*`, the per-task part of
    `sandboxes.pyenv`). The shared environment of its spec (`env-*`) is never among them."""
    from sandboxes.pyenv import cache_dir
    from tasks.spec import workspace_cache_dir

    paths = []
    if original.workspace is not None and original.workspace.parent == workspace_cache_dir() / "git":
        paths.append(original.workspace)
    candidates = [prepared.workspace, *(Path(m["source"]) for m in prepared.sandbox.get("mounts", []))]
    for path in candidates:
        if path is not None and path.parent.parent == cache_dir() and path.parent.name.startswith("ws-"):
            paths.append(path.parent)
    return list(dict.fromkeys(paths))


def prunable(done: tuple[Task, Task], pending: list[tuple[Task, Task]], later: list[Task]) -> list[Path]:
    """The folders of the task just `done` (original, prepared) that no task still to come
    uses: `pending` are the (original, prepared) pairs of its spec still to grade, `later`
    the tasks of specs not yet prepared. Rows of one base commit share their workspace and
    its environment copy (django__django-15268 and -15278), so a folder goes with its last
    user, never with its first."""
    needed = {path for pair in pending for path in owned_paths(*pair)}
    needed |= {path for task in later for path in owned_paths(task, task)}
    return [path for path in owned_paths(*done) if path not in needed]


def write_tables(out: Path, *, measure_disk: bool = True) -> None:
    """`table.md` and `summary.md` from every verdict in `out/results.jsonl`; then, when
    `measure_disk`, the summary again with the caches' disk use (`cache_sizes`, a `du` that
    can take a minute over tens of GiB: a Ctrl-C during it leaves the first summary)."""
    records = sorted(read_records(out / RESULTS), key=lambda r: (r.repo, _version_key(r.version), r.task_id))
    (out / TABLE).write_text(render_table(records))
    (out / SUMMARY).write_text(render_summary(records, {}))
    if measure_disk:
        log.info("measuring the environment and workspace caches' disk use (du; Ctrl-C skips it)")
        (out / SUMMARY).write_text(render_summary(records, cache_sizes()))


def render_table(records: list[RowRecord]) -> str:
    lines = [
        "| task | repo | version | verdict | F2P | P2P | env s | test s | reason |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        reason = " ".join(r.reason.split()).replace("|", "\\|")
        reason = reason if len(reason) <= 300 else reason[:300] + f" ... (log: {r.log})"
        built = " (built)" if r.env_built else ""
        lines.append(
            f"| {r.task_id} | {r.repo} | {r.version} | {VERDICTS.get(r.status, r.status)} | {r.fail_to_pass} | "
            f"{r.pass_to_pass} | {r.env_seconds:.1f}{built} | {r.test_seconds:.1f} | {reason} |"
        )
    return "\n".join(lines) + "\n"


def _counts(records: list[RowRecord]) -> str:
    by = Counter(r.status for r in records)
    env, test = sum(r.env_seconds for r in records), sum(r.test_seconds for r in records)
    return f"{len(records)} | {by['ok']} | {by['failed']} | {by['unavailable']} | {env / 60:.1f} | {test / 60:.1f}"


def rows_per_hour(records: list[RowRecord], *, cold: bool) -> str:
    """Rows an hour over the tasks of specs whose environment this run built (`cold`: their
    build time counted) or found built (warm), from the seconds each took; `-` for none."""
    built_specs = {(r.repo, r.version) for r in records if r.env_built}
    chosen = [r for r in records if ((r.repo, r.version) in built_specs) is cold]
    seconds = sum(r.env_seconds + r.test_seconds for r in chosen)
    return f"{len(chosen) / seconds * 3600:.0f} ({len(chosen)} rows)" if chosen and seconds else "-"


def render_summary(records: list[RowRecord], caches: dict[str, int | None]) -> str:
    head = "| {} | rows | ok | FAIL | n/a | env min | test min |\n|---|---|---|---|---|---|---|"
    lines = ["# Validation run", "", f"{len(records)} tasks graded (gold and empty patch).", ""]
    lines += ["## By repository", "", head.format("repository")]
    repos: dict[str, list[RowRecord]] = {}
    specs: dict[tuple[str, str], list[RowRecord]] = {}
    for r in records:
        repos.setdefault(r.repo, []).append(r)
        specs.setdefault((r.repo, r.version), []).append(r)
    lines += [f"| {repo} | {_counts(rs)} |" for repo, rs in repos.items()]
    lines += [f"| **all** | {_counts(records)} |", "", "## By repository and version", "", head.format("spec")]
    lines += [f"| {f'{repo} {version}'.strip()} | {_counts(rs)} |" for (repo, version), rs in specs.items()]
    versions = Counter(r.graded_by or "not recorded" for r in records)
    lines += ["", "Graded by: " + ", ".join(f"{name} ({count} rows)" for name, count in versions.most_common())]
    lines += [
        "",
        "## Pace and disk",
        "",
        f"- rows per hour, environments built in this run (cold): {rows_per_hour(records, cold=True)}",
        f"- rows per hour, environments built before (warm): {rows_per_hour(records, cold=False)}",
    ]
    for name, size in caches.items():
        lines.append(f"- {name}: " + (f"{size / 2**30:.1f} GiB" if size is not None else "cannot be read"))
    if not caches:
        lines.append("- the caches' disk use: not measured (measured when a run ends, unless stopped)")
    return "\n".join(lines) + "\n"


def cache_sizes() -> dict[str, int | None]:
    """Bytes on disk of the environment cache and the workspace cache (`du`), None where
    they cannot be read."""
    from sandboxes.pyenv import cache_dir
    from tasks.spec import workspace_cache_dir

    sizes: dict[str, int | None] = {}
    for name, path in (("environment cache", cache_dir()), ("workspace cache", workspace_cache_dir())):
        label = f"{name} ({path})"
        if not path.exists():
            sizes[label] = 0
            continue
        done = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True)
        first = done.stdout.split()[:1]
        sizes[label] = int(first[0]) if first and first[0].isdigit() else None
    return sizes


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))
