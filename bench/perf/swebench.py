"""SWE-bench rows from a repository cache: seconds per row, cold and warm, and instances per hour.

Two commands, each run twice as the user runs them (a subprocess each, timed from start to
exit), per repository:
- `python -m agent_env validate ROWS --repo-cache DIR` (environment, gold patch resolves, empty
  patch does not);
- `python -m evals.swe --model gold --repo-cache DIR` (the gold patch graded as a model's).
Cold: an empty cache (`AGENTIC_RL_CACHE` a fresh folder: environments and workspaces are
built). Warm: the same command again over that cache (a fresh output folder for each, so
that it does not resume). `warm_speedup` = cold / warm seconds, measured side by side.

The baseline a warm validation is held to: the tests' own run time. Beside the warm run,
each row's test command (the harness's, over its whole test files) runs plainly in that
warm cache, as SWE-bench's harness runs it, once with the gold patch and once without (the
two trees validation grades): a sandbox, `git apply` of the patch and the test patch, the
command. `validate_warm_over_tests` = warm validation seconds / those seconds, per row and
in all, from the command's wall time; `validate_grading_over_tests` the same from the
seconds the validation itself spent grading each row (its `results.jsonl`), without the
command's start-up and the environments' cache checks. `--repeat N` pairs N warm
validations with N of those runs, in alternating order, and gives medians.

Default input: a synthetic repository cache built here (a small requests-shaped repository,
`--rows` rows of the psf/requests 1.1 spec, one per commit: one shared environment, one
install per row), so the benchmark runs on any machine with pyenv's Python 3.9 and a
package index. Real rows: `--repo-cache DIR --instances a,b,c --dataset PATH`.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from bench.common import RESULTS, report

ROWS = 4
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}
SETUP = 'from setuptools import setup\n\nsetup(name="requests", version="1.1.0", packages=["requests"])\n'
MODELS = 'def length(body=None):\n    return "0" if body is None else "0"\n'
FIXED = 'def length(body=None):\n    return "0" if body is None else str(len(body))\n'
TESTS = (
    "import unittest\n\nfrom requests.models import length\n\n\n"
    "class RequestsTestCase(unittest.TestCase):\n"
    "    def test_empty(self):\n"
    '        self.assertEqual(length(), "0")\n'
)
NEW_TEST = '\n    def test_body(self):\n        self.assertEqual(length("abc"), "3")\n'


def _diff(path: str, old: str, new: str) -> str:
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
    return f"diff --git a/{path} b/{path}\n{body}"


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout


def synthetic_rows(folder: Path, rows: int) -> tuple[Path, Path, list[str]]:
    """(a repository cache holding psf/requests, a .jsonl of `rows` rows over it, their ids):
    one commit per row (each adds a module), the same bug and fix in each."""
    clone = folder / "repos" / "psf__requests"
    clone.mkdir(parents=True)
    _git(clone, "init", "-q", "-b", "main")
    files = {"setup.py": SETUP, "requests/__init__.py": "", "requests/models.py": MODELS, "test_requests.py": TESTS}
    commits = []
    for index in range(rows):
        files[f"requests/module_{index}.py"] = f"VALUE = {index}\n"
        for name, text in files.items():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            (clone / name).write_text(text)
        _git(clone, "add", "-A")
        _git(clone, "commit", "-q", "-m", f"commit {index}")
        commits.append(_git(clone, "rev-parse", "HEAD").strip())
    ids = [f"psf__requests-{9000 + index}" for index in range(rows)]
    lines = []
    for instance, commit in zip(ids, commits, strict=True):
        row = {
            "instance_id": instance,
            "repo": "psf/requests",
            "version": "1.1",
            "base_commit": commit,
            "environment_setup_commit": commits[-1],
            "problem_statement": "length(body) returns '0' for a body; it should return its length.",
            "patch": _diff("requests/models.py", MODELS, FIXED),
            "test_patch": _diff("test_requests.py", TESTS, TESTS + NEW_TEST),
            "FAIL_TO_PASS": json.dumps(["test_requests.py::RequestsTestCase::test_body"]),
            "PASS_TO_PASS": json.dumps(["test_requests.py::RequestsTestCase::test_empty"]),
            "difficulty": "<15 min fix",
        }
        lines.append(json.dumps(row) + "\n")
    dataset = folder / "rows.jsonl"
    dataset.write_text("".join(lines))
    return folder / "repos", dataset, ids


def rows_by_repo(dataset: Path, instances: list[str]) -> dict[str, list[str]]:
    """The wanted instance ids of `dataset`, by repository (in the order given)."""
    repos = {}
    with dataset.open() as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                repos[row["instance_id"]] = row["repo"]
    unknown = [i for i in instances if i not in repos]
    if unknown:
        raise SystemExit(f"error: {dataset}: instance(s) not found: {unknown}; give ids of rows in it")
    grouped: dict[str, list[str]] = defaultdict(list)
    for instance in instances:
        grouped[repos[instance]].append(instance)
    return dict(grouped)


def timed(command: list[str], cache: Path, log: Path) -> tuple[float, int]:
    """(seconds, exit status) of `command` run with `cache` as AGENTIC_RL_CACHE; its output to `log`."""
    env = {k: v for k, v in os.environ.items() if k != "AGENTIC_RL_ENV_CACHE"}
    env["AGENTIC_RL_CACHE"] = str(cache)
    started = time.monotonic()
    with log.open("w") as out:
        status = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    return time.monotonic() - started, status


@contextlib.contextmanager
def cache_at(cache: Path) -> Iterator[None]:
    """`AGENTIC_RL_CACHE` set to `cache` in this process (read where each cache path is made)."""
    saved = {name: os.environ.get(name) for name in ("AGENTIC_RL_CACHE", "AGENTIC_RL_ENV_CACHE")}
    os.environ.pop("AGENTIC_RL_ENV_CACHE", None)
    os.environ["AGENTIC_RL_CACHE"] = str(cache)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def tests_own_seconds(dataset: Path, repo_cache: Path, ids: list[str], backend: str, cache: Path) -> dict[str, float]:
    """Each row's plain test runs in the warm `cache`: its test command with the gold patch,
    plus the same without it (`bench.perf.grading.plain_run`, in the grading run's sandbox)."""
    from agent_env.environments import prepare_environments
    from agent_env.grading import grading_spec_for
    from bench.perf.grading import plain_run
    from sandboxes import make_sandbox
    from tasks import load_sources

    seconds = {}
    with cache_at(cache):
        tasks = prepare_environments(load_sources([str(dataset)], repo_cache, ids), backend, progress=False)
        for task in tasks:
            spec = grading_spec_for(task)  # the sandbox validation grades in (its output bound)

            def factory(_agent_spec, spec=spec):
                return make_sandbox(spec, backend)

            seconds[task.id] = plain_run(task, task.gold_patch, factory) + plain_run(task, "", factory)
            print(f"tests' own run {task.id}: {seconds[task.id]:.1f} s (gold and empty)", flush=True)
    return seconds


def grading_seconds(out: Path) -> dict[str, float]:
    """The seconds a validation spent grading each row (gold and empty), from its `--out`."""
    from agent_env.validate_run import RESULTS, read_records

    return {record.task_id: record.test_seconds for record in read_records(out / RESULTS)}


def slug(repo: str) -> str:
    return repo.replace("/", "__")


def run_command(command: list[str], rows: int, cache: Path, failures: list[str]) -> float:
    """The seconds of `timed(command)` (its output folder is the last argument; its log beside
    it), said in a line; a failure is added to `failures`."""
    out = Path(command[-1])
    log = out.with_name(f"{out.name}.log")
    seconds, status = timed(command, cache, log)
    print(f"{out.name}: {seconds:.1f} s for {rows} row(s), exit status {status}", flush=True)
    if status != 0:
        failures.append(f"{out.name} (exit status {status}; log: {log})")
    return seconds


def measure(args: argparse.Namespace, dataset: Path, repo_cache: Path, groups: dict[str, list[str]], work: Path):
    figures: dict[str, float] = {}
    totals: dict[str, float] = defaultdict(float)
    failures = []
    commands = {
        "validate": lambda ids, out: [
            sys.executable, "-m", "agent_env", "validate", str(dataset), "--repo-cache", str(repo_cache),
            "--instances", ",".join(ids), "--sandbox", args.sandbox, "--build-workers", str(args.workers),
            "--out", str(out),
        ],
        "eval": lambda ids, out: [
            sys.executable, "-m", "evals.swe", "--model", "gold", "--dataset", str(dataset),
            "--repo-cache", str(repo_cache), "--instances", ",".join(ids), "--sandbox", args.sandbox,
            "--workers", str(args.workers), "--grader", "project", "--output", str(out),
        ],
    }  # fmt: skip
    for repo, ids in groups.items():
        for name, command in commands.items():
            if name == "eval" and args.skip_eval:
                continue
            cache = Path(tempfile.mkdtemp(prefix=f"{name}-cache-", dir=work))
            cold = run_command(command(ids, work / f"{name}-{slug(repo)}-cold"), len(ids), cache, failures)
            warm, own, grading = [], [], []
            # Validation: each warm run paired with the tests' own runs in the same cache, the
            # order alternating, so a machine getting busier or calmer favours neither.
            for index in range(args.repeat if name == "validate" else 1):
                paired = ("warm", "own") if index % 2 == 0 else ("own", "warm")
                for step in paired if name == "validate" else ("warm",):
                    if step == "warm":
                        out = work / f"{name}-{slug(repo)}-warm{index}"
                        warm.append(run_command(command(ids, out), len(ids), cache, failures))
                        if name == "validate":
                            grading.append(sum(grading_seconds(out).get(i, 0.0) for i in ids))
                    else:
                        own.append(sum(tests_own_seconds(dataset, repo_cache, ids, args.sandbox, cache).values()))
            figures[f"{name}_cold_s_per_row[{repo}]"] = cold / len(ids)
            figures[f"{name}_warm_s_per_row[{repo}]"] = statistics.median(warm) / len(ids)
            totals[f"{name}_cold"] += cold
            totals[f"{name}_warm"] += statistics.median(warm)
            if name == "validate":
                figures[f"tests_own_s_per_row[{repo}]"] = statistics.median(own) / len(ids)
                figures[f"validate_warm_over_tests[{repo}]"] = statistics.median(
                    w / o for w, o in zip(warm, own, strict=True)
                )
                figures[f"validate_grading_over_tests[{repo}]"] = statistics.median(
                    g / o for g, o in zip(grading, own, strict=True)
                )
                totals["tests_own"] += statistics.median(own)
                totals["grading"] += statistics.median(grading)
    rows = sum(len(ids) for ids in groups.values())
    summary: dict[str, float] = {"rows": rows, "repositories": len(groups)}
    for name in commands:
        if f"{name}_cold" not in totals:
            continue
        cold, warm = totals[f"{name}_cold"], totals[f"{name}_warm"]
        summary |= {
            f"{name}_cold_s_per_row": cold / rows,
            f"{name}_warm_s_per_row": warm / rows,
            f"{name}_cold_instances_per_hour": 3600 * rows / cold,
            f"{name}_warm_instances_per_hour": 3600 * rows / warm,
            f"{name}_warm_speedup": cold / warm,
        }
    summary |= {
        "tests_own_s_per_row": totals["tests_own"] / rows,
        "validate_warm_over_tests": totals["validate_warm"] / totals["tests_own"],
        "validate_grading_over_tests": totals["grading"] / totals["tests_own"],
    }
    return {**summary, **figures}, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.perf.swebench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python -m bench.perf.swebench             # synthetic rows (about 3 min on 2 cores)\n"
        "  python -m bench.perf.swebench --repo-cache ~/swe-repos --dataset swe_bench_verified.jsonl \\\n"
        "      --instances psf__requests-1142,pallets__flask-5014",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "swebench.json", help="where to write the figures")
    parser.add_argument("--repo-cache", type=Path, default=None, help="folder of git clones (default: synthetic)")
    parser.add_argument("--dataset", type=Path, default=None, help="SWE-bench .jsonl the --instances are in")
    parser.add_argument("--instances", default="", help="comma-separated instance ids (with --repo-cache)")
    parser.add_argument("--rows", type=int, default=ROWS, help="synthetic rows (without --repo-cache)")
    parser.add_argument("--workers", type=int, default=2, help="environments built (and instances run) at once")
    parser.add_argument("--sandbox", default="local", choices=["local", "docker"])
    parser.add_argument("--skip-eval", action="store_true", help="measure `agent_env validate` only")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="warm validations, each paired with the tests' own runs (medians; default 1)",
    )
    args = parser.parse_args(argv)
    instances = [i for i in args.instances.split(",") if i]
    if args.repo_cache is not None and (args.dataset is None or not instances):
        parser.error("--repo-cache needs --dataset PATH and --instances a,b,c (the rows to measure)")
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: give a number of at least 1")
    if args.repo_cache is not None and not args.repo_cache.is_dir():
        parser.error(f"--repo-cache {args.repo_cache}: no such folder; give a folder of git clones")
    if args.dataset is not None and not args.dataset.is_file():
        parser.error(f"--dataset {args.dataset}: no such file; give a SWE-bench .jsonl")
    with tempfile.TemporaryDirectory(prefix="bench-swebench-") as folder:
        work = Path(folder)
        if args.repo_cache is None:
            repo_cache, dataset, instances = synthetic_rows(work / "synthetic", args.rows)
            source = f"synthetic: {args.rows} rows of psf/requests 1.1"
        else:
            repo_cache, dataset, source = args.repo_cache, args.dataset, f"{args.dataset.name}, {len(instances)} rows"
        groups = rows_by_repo(dataset, instances)
        figures, failures = measure(args, dataset, repo_cache, groups, work)
        report(f"bench.perf.swebench ({source}; {args.sandbox} sandbox, {args.workers} workers)", figures, args.json)
        for failure in failures:  # the logs go with the folder: say what failed while it is there
            print(f"failed: {failure}", file=sys.stderr)
            print((work / failure.split("log: ")[1].rstrip(")")).read_text()[-2000:], file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
