"""`python -m agent_env validate [PATH ...]`: prove tasks work, by grading them for real.

Each definition's schema is checked (errors name the file and the field), then the gold
patch must resolve the task and the empty patch must not. PATH is a task folder, a
`task.yaml`, a folder of tasks, SWE-bench rows (a `.jsonl`), or a task stream
(`stream:online`: every task its phases pick); the built-in suite by default. SWE-bench rows
run from a repository cache (`--repo-cache DIR`, a folder of git clones) in an environment
built for `--sandbox` (`local` or `docker`); `--instances` picks rows. A task that cannot run
here (no clone, an environment that cannot be built, a required test that failed for want
of the network) is reported as not runnable here, with the reason, apart from tasks that
fail. Each verdict line gives the seconds it took and the log of both runs (`--logs DIR`); a
failed task's lines say which required tests failed and which the log does not name, each
line cut at `LINE_LIMIT` characters with how much more the log holds. With `--out RUN` the
run is resumable and leaves tables (`agent_env.validate_run`): each verdict is appended to
`RUN/results.jsonl` as it comes, a rerun skips the tasks there (`--redo failed,unavailable`
grades those verdicts again), each line shows `[k/n, ETA]`,
and `RUN/table.md` and `RUN/summary.md` are written at the end (and on Ctrl-C); `--shard I/N`
takes one of N slices of the tasks, for N machines or workers. Exit status: 0 every
task valid, 1 a task failed, 3 none failed but some are not runnable here, 2 bad input. The
rules (the dataset's for SWE-bench rows, a stricter one for authored tasks):
tasks/README.md. (`python -m tasks list` lists tasks; validating grades them, which is this
layer's work.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent_env.validate import TaskValidation, validate_tasks
from agent_env.validate_run import RESULTS, SUMMARY, TABLE, finished_ids, parse_shard, read_records, shard, spec_order
from sandboxes.console import interrupted, interrupts, setup_logging
from tasks import TaskError, add_source_arguments, load_sources
from tasks.spec import workspace_cache_dir


def default_log_dir() -> Path:
    """Where `validate` keeps each task's gold and empty runs' output by default."""
    return workspace_cache_dir().parent / "validate-logs"


LINE_LIMIT = 400
"""The most characters of a verdict's cause or test list printed on one line: a row with
hundreds of required tests would otherwise print lines of 20,000 characters."""
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_NOT_RUNNABLE = 0, 1, 2, 3
"""`validate`'s exit statuses: a script tells a broken task from one it cannot run here."""


def cut(text: str, log: str = "", limit: int = LINE_LIMIT) -> str:
    """`text` whole when it fits in `limit` characters, else its start and how much more
    there is (and where, when the verdict has a log)."""
    if len(text) <= limit:
        return text
    where = f"; all of it in {log}" if log else ""
    return f"{text[:limit].rstrip(' ,;')} ... ({len(text) - limit} more characters{where})"


def format_validation(result: TaskValidation) -> list[str]:
    """A verdict as printed: `ok`/`FAIL`/`n/a`, the task, what was found, the seconds and the
    log; then a line per warning, and for a failed task which required tests the gold run
    failed (with their statuses) and which its log does not name. A failed task's first
    words are its first problem; every cause and list is cut at `LINE_LIMIT` characters."""
    label = {"ok": "ok   ", "failed": "FAIL ", "unavailable": "n/a  "}[result.status]
    if result.status == "failed":
        text = cut("; ".join(result.problems), result.log)
    else:
        text = result.checked if result.status == "ok" else cut(result.reason, result.log)
    where = [f"{result.seconds:.1f} s"] if result.seconds or result.status != "unavailable" else []
    where += [f"log: {result.log}"] if result.log else []
    lines = [f"{label} {result.task_id}: {'; '.join([text, *where])}"]
    lines += [f"      warning: {cut(warning, result.log)}" for warning in result.warnings]
    if result.failed_tests:
        failed = ", ".join(f"{test} ({status})" for test, status in result.failed_tests)
        lines.append(f"      failed ({len(result.failed_tests)}): {cut(failed, result.log)}")
    if result.missing_tests:
        missing = ", ".join(result.missing_tests)
        lines.append(f"      missing (not in the log) ({len(result.missing_tests)}): {cut(missing, result.log)}")
    return lines


def exit_status(results: list[TaskValidation]) -> int:
    """`EXIT_FAILED` when a task failed, else `EXIT_NOT_RUNNABLE` when one cannot run here,
    else `EXIT_OK`."""
    if any(r.status == "failed" for r in results):
        return EXIT_FAILED
    return EXIT_NOT_RUNNABLE if any(r.status == "unavailable" for r in results) else EXIT_OK


def validate(
    paths: list[str],
    repo_cache: Path | None = None,
    instances: list[str] | None = None,
    sandbox: str = "local",
    log_dir: Path | None = None,
    build_workers: int | None = None,
    out: Path | None = None,
    shard_of: tuple[int, int] | None = None,
    prune: bool = False,
    redo: frozenset[str] = frozenset(),
) -> int:
    # A resumed run's graded rows need no workspace: their checkouts (tens of GB over all
    # of Verified) are not made again.
    done = finished_ids(out, redo) if out is not None else frozenset()
    tasks = load_sources(paths, repo_cache, instances, no_checkout=done)
    if shard_of is not None:
        tasks = shard(spec_order(tasks, sandbox), *shard_of)
        print(f"shard {shard_of[0]}/{shard_of[1]}: {len(tasks)} task(s)", flush=True)
    if out is not None:
        return validate_into(tasks, out, sandbox, log_dir, build_workers, prune, redo)
    results: list[TaskValidation] = []
    log_dir = log_dir or default_log_dir()
    try:
        for result in validate_tasks(tasks, sandbox, log_dir, build_workers=build_workers):
            results.append(result)
            print("\n".join(format_validation(result)), flush=True)
    except KeyboardInterrupt as exc:  # the verdicts so far are printed: say so, and how to go on
        exc.kept = (
            f"{len(results)} of {len(tasks)} tasks validated ({sum(r.ok for r in results)} valid, printed above); "
            "run the same command again, or name the remaining tasks, to validate the rest"
        )
        raise
    valid = sum(r.ok for r in results)
    unavailable = sum(r.status == "unavailable" for r in results)
    print(f"{valid}/{len(results)} tasks valid" + (f", {unavailable} not runnable here" if unavailable else ""))
    return exit_status(results)


def validate_into(
    tasks: list,
    out: Path,
    sandbox: str,
    log_dir: Path | None,
    build_workers: int | None,
    prune: bool = False,
    redo: frozenset[str] = frozenset(),
) -> int:
    """`validate` as a resumable run in the folder `out` (`agent_env.validate_run`)."""
    from agent_env.validate_run import run

    def show(result: TaskValidation, progress: str) -> None:
        lines = format_validation(result)
        print("\n".join([f"{progress} {lines[0]}", *lines[1:]]), flush=True)

    try:
        run(tasks, out, sandbox, build_workers=build_workers, log_dir=log_dir, on_result=show, prune=prune, redo=redo)
    except KeyboardInterrupt as exc:
        done = len(read_records(out / RESULTS))
        exc.kept = (
            f"{done} verdicts kept in {out / RESULTS} (tables: {out / TABLE}, {out / SUMMARY}); "
            "run the same command again to go on with the rest"
        )
        raise
    wanted = {t.id for t in tasks}
    records = [r for r in read_records(out / RESULTS) if r.task_id in wanted]
    by = {status: sum(r.status == status for r in records) for status in ("ok", "failed", "unavailable")}
    print(
        f"{by['ok']}/{len(records)} tasks valid, {by['failed']} failed, {by['unavailable']} not runnable here "
        f"(all verdicts: {out / RESULTS}; per task: {out / TABLE}; by repository and version: {out / SUMMARY})"
    )
    if by["failed"]:
        return EXIT_FAILED
    return EXIT_NOT_RUNNABLE if by["unavailable"] else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    setup_logging()
    parser = argparse.ArgumentParser(
        prog="python -m agent_env",
        description=__doc__.split("\n")[0],
        epilog="example: python -m agent_env validate tasks/builtin/collections-lru-update-evicts"
        "  (no PATH: the built-in suite); a resumable run of SWE-bench Verified: python -m agent_env validate "
        "verified --repo-cache ~/swe-repos --out runs/verified. Exit status: 0 every task valid, 1 a task failed, 3 none failed "
        "but some are not runnable here, 2 bad input.",
    )
    parser.add_argument("command", choices=["validate"])
    add_source_arguments(parser)
    parser.add_argument("--sandbox", default="local", choices=["local", "docker"], help="where validation runs")
    parser.add_argument(
        "--logs",
        type=Path,
        default=None,
        help="folder for each task's test output (default: $AGENTIC_RL_CACHE/validate-logs)",
    )
    parser.add_argument(
        "--build-workers",
        type=int,
        default=None,
        metavar="N",
        help="environments built at once, one per (repo, version) spec (default: min(4, cores + 1))",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="RUN",
        help="resumable run: verdicts appended to RUN/results.jsonl (a rerun skips them), tables in RUN/table.md "
        "and RUN/summary.md, logs in RUN/logs unless --logs",
    )
    parser.add_argument(
        "--shard", default=None, metavar="I/N", help="validate only the I-th of N slices of the tasks (e.g. 2/4)"
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="with --out: delete each task's own environment copy and workspace once its verdict is written "
        "(the specs' shared environments stay); all of Verified then fits on a small disk",
    )
    parser.add_argument(
        "--redo",
        default="",
        metavar="VERDICTS",
        help="with --out: grade again the tasks whose last verdict is one of these (failed, unavailable; "
        "comma-separated), e.g. after fixing their environment: --redo failed,unavailable",
    )
    args = parser.parse_args(argv)
    redo = frozenset(v for v in args.redo.split(",") if v)
    if redo - {"failed", "unavailable"}:
        parser.error(f"--redo {args.redo}: give failed, unavailable or both (comma-separated)")
    if redo and args.out is None:
        parser.error("--redo goes with --out (a resumable run): it names verdicts of RUN/results.jsonl")
    if args.prune and args.out is None:
        parser.error("--prune goes with --out (a resumable run): without it, nothing says which tasks are done")
    if args.build_workers is not None and args.build_workers < 1:
        parser.error(f"--build-workers {args.build_workers}: give a number of at least 1")
    shard_of = None
    if args.shard is not None:
        try:
            shard_of = parse_shard(args.shard)
        except ValueError as exc:
            parser.error(str(exc))
    instances = [i for i in args.instances.split(",") if i] or None
    with interrupts():  # Ctrl-C / SIGTERM: sandboxes closed, one line, exit 130 / 143
        try:
            return validate(
                args.paths,
                args.repo_cache,
                instances,
                args.sandbox,
                args.logs,
                args.build_workers,
                args.out,
                shard_of,
                args.prune,
                redo,
            )
        except TaskError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except BrokenPipeError:  # the reader went away (`... | head`): nothing left to say
            sys.stderr.close()
            return 0
        except KeyboardInterrupt as exc:
            return interrupted(exc, getattr(exc, "kept", "nothing was validated yet; run the same command again"))


if __name__ == "__main__":
    sys.exit(main())
