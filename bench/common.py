"""What every benchmark shares: the results folder, the table and its JSON file; and the perf
benches' helpers (percentiles, the common options, the docker check, a load-generating task).

`RESULTS` (`bench/results/`, ignored by git) is where a run writes its figures by default:
`python -m bench.perf.NAME` to `NAME.json`, `python -m bench.experiments.NAME` to `NAME.json`
(its runs go to its `--out`). The experiments' records committed to this repository are in
`docs/results/`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def arguments(module: str, description: str | None = None, example: str | None = None) -> argparse.Namespace:
    """Parse the common options of `python -m MODULE` (e.g. `bench.perf.tree`; its figures go to
    `RESULTS/tree.json` by default); `description` is what `--help` says the benchmark measures."""
    epilog = f"example: {example or f'python -m {module}'}"
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description, epilog=epilog)
    name = module.rsplit(".", 1)[-1]
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
    as a real test suite without a model's work in it (bench.perf.async, bench.perf.multiplex)."""
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
