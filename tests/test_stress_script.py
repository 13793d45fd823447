"""scripts/stress_tests.sh: rounds under load, one line each, totals, and an exit status that
says whether every round passed (the stress check of issue #38 reads it)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "stress_tests.sh"


def _stress(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PY": sys.executable, "LOAD": "1", "STRESS_LOGS": str(tmp_path / "logs")}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def suite(tmp_path):
    (tmp_path / "test_calm.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    (tmp_path / "test_broken.py").write_text("def test_one():\n    assert 1 == 2\n")
    return tmp_path


def test_every_round_passing_is_exit_0_with_the_totals(suite):
    done = _stress("2", str(suite / "test_calm.py"), tmp_path=suite)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[1:3]] == ["round 1/2", "round 2/2"]
    assert lines[-1] == "rounds: 2 passed, 0 failed; tests: 4 passed, 0 failed (0 skipped)"
    assert sorted(p.name for p in (suite / "logs").iterdir()) == ["round-1.log", "round-2.log"]


def test_a_failing_round_is_exit_1_and_names_its_log(suite):
    done = _stress("1", str(suite / "test_broken.py"), tmp_path=suite)
    assert done.returncode == 1
    assert f"round 1/1: FAILED (exit 1, {suite / 'logs' / 'round-1.log'})" in done.stdout
    assert done.stdout.splitlines()[-1] == "rounds: 0 passed, 1 failed; tests: 0 passed, 1 failed (0 skipped)"


def test_help_names_the_default_selection_and_a_bad_count_is_usage():
    shown = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0
    assert 'scripts/stress_tests.sh 20            # the stress check: `-m "slow or ray or signals"' in shown.stdout
    bad = subprocess.run(["bash", str(SCRIPT), "twenty"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and bad.stderr.startswith("usage: ")


SIGNAL_CALLS = {"raise_signal", "pthread_kill", "kill", "killpg", "send_signal", "terminate"}
SIGNAL_NAMES = {"SIGKILL", "SIGINT", "SIGTERM"}
STRESSED = {"signals", "slow", "ray"}


def _marks(nodes) -> set[str]:
    return {m for node in nodes for m in re.findall(r"pytest\.mark\.(\w+)", ast.unparse(node))}


def test_every_test_that_sends_a_signal_is_in_the_stress_check():
    """A test whose own code sends a signal (`os.kill`, `signal.raise_signal`, `send_signal`,
    `signal.SIGTERM` ...) is where a race hides (the one that opened issue #38 was such a test):
    it must carry a marker that `scripts/stress_tests.sh COUNT` reruns."""
    missing = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        module = _marks(n.value for n in tree.body if isinstance(n, ast.Assign)
                        and any(getattr(t, "id", "") == "pytestmark" for t in n.targets))  # fmt: skip
        for node in ast.walk(tree):
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test")):
                continue
            signals = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} & (SIGNAL_CALLS | SIGNAL_NAMES)
            fixtures = {a.arg for a in node.args.args}
            if signals and not (_marks(node.decorator_list) | module) & STRESSED and "ray_cluster" not in fixtures:
                missing.append(f"{path.relative_to(ROOT)}::{node.name} ({', '.join(sorted(signals))})")
    assert not missing, "mark these @pytest.mark.signals:\n" + "\n".join(missing)


def test_no_hypothesis_test_keeps_a_clock():
    """Hypothesis's deadline and its too-slow health check fail correct tests on a loaded
    machine: the suite's profile (tests/conftest.py) turns both off, and no test turns a
    deadline back on."""
    from hypothesis import HealthCheck, settings

    assert settings.default.deadline is None and HealthCheck.too_slow in settings.default.suppress_health_check
    clocks = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("settings", "register_profile")
        for keyword in node.keywords
        if keyword.arg == "deadline" and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is None)
    ]
    assert not clocks, f"a Hypothesis deadline: {clocks}"
