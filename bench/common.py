"""Shared helpers for benchmarks: percentiles, the table, the JSON file."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def arguments(name: str, description: str | None = None, example: str | None = None) -> argparse.Namespace:
    """Parse the common options; `description` is what `--help` says the benchmark measures."""
    epilog = f"example: {example or f'python -m bench.{name}'}"
    parser = argparse.ArgumentParser(prog=f"python -m bench.{name}", description=description, epilog=epilog)
    parser.add_argument("--json", type=Path, default=RESULTS / f"{name}.json", help="where to write the figures")
    return parser.parse_args()


def report(name: str, figures: dict[str, float], path: Path) -> None:
    width = max(len(k) for k in figures)
    print(f"{name}\n" + "-" * (width + 16))
    for key, value in figures.items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {shown:>12}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"written: {path}")


def keep_one_setting(name: str, out: Path, setting: dict) -> None:
    """A resumable bench's `out` holds runs of one setting: exit naming the one it holds when
    `setting` differs, else record it (a first run) and go on."""
    recorded = out / "setting.json"
    if recorded.is_file() and json.loads(recorded.read_text()) != setting:
        raise SystemExit(f"{name}: {out} holds runs made with {recorded.read_text().strip()}; use another --out")
    out.mkdir(parents=True, exist_ok=True)
    recorded.write_text(json.dumps(setting) + "\n")


def on_ray(prog: str, workers: int, work: Callable[[], object], kept: Callable[[BaseException], str]) -> object:
    """`work()` on a local Ray started for `workers` actors (shut down after), Ctrl-C and
    SIGTERM handled: returns what `work` returned, or exits with the interrupt's status after
    the one line saying what `kept(exc)` kept; a config or task error is one line naming `prog`."""
    import ray

    from sandboxes.console import interrupted, interrupts
    from tasks import TaskError
    from trainer.config import ConfigError
    from trainer.orchestrator.loop import start_ray

    with interrupts():
        started = False
        try:
            started = start_ray(workers=workers)
            return work()
        except KeyboardInterrupt as exc:
            sys.exit(interrupted(exc, kept(exc)))
        except (ConfigError, TaskError) as exc:
            sys.exit(f"{prog}: {exc}")
        finally:
            if started:
                ray.shutdown()


def kept_runs(out: Path) -> str:
    """The line an interrupted arms bench ends with: the runs in `out/runs` and how to go on."""
    runs = sorted(p.name for p in (out / "runs").glob("*-s*")) if (out / "runs").is_dir() else []
    return (
        f"runs so far ({', '.join(runs) or 'none'}; unfinished ones resume from their newest checkpoint) "
        f"kept in {out}; run the same command again to continue"
    )


def docker_problem() -> str | None:
    """Why the docker arm of a bench cannot run (no SDK, no engine, no base image), or None."""
    try:
        from sandboxes.docker_backend import docker_available

        return docker_available()
    except ImportError as exc:
        return f"the docker SDK is not installed: {exc}"


def write_calc_task(folder: Path, name: str, *, family: str, sleep_seconds: float, statement: str) -> None:
    """A one-line-bug task (`calc.add` subtracts) whose hidden test first sleeps
    `sleep_seconds` (0: not at all): the benches' load generator, an episode as slow to grade
    as a real test suite without a model's work in it (bench.async, bench.multiplex)."""
    import textwrap

    root = folder / name
    (root / "repo" / "tests").mkdir(parents=True, exist_ok=True)
    (root / "repo" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "repo" / "tests" / "__init__.py").write_text("")
    sleeping = f"time.sleep({sleep_seconds})" if sleep_seconds else "pass"
    (root / "repo" / "tests" / "test_calc.py").write_text(
        "import time\nimport unittest\n\nfrom calc import add\n\n\nclass Calc(unittest.TestCase):\n"
        f"    def test_add(self):\n        {sleeping}\n        self.assertEqual(add(2, 3), 5)\n"
    )
    (root / "task.yaml").write_text(
        textwrap.dedent(
            f"""\
            id: {name}
            family: {family}
            difficulty: easy
            workspace: repo
            grading:
              test_command: python3 -m unittest -v tests.test_calc
              log_parser: unittest
              fail_to_pass: [tests.test_calc.Calc.test_add]
            limits:
              max_turns: 1
              grading_timeout_s: 120
            """
        )
        + f"problem_statement: {json.dumps(statement)}\n"
    )
