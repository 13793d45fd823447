"""The README's promises that a test can hold it to."""

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_readme_starts_with_the_two_commands():
    first_block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)[1]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["make train-swe", "make test"]


def test_ci_runs_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test\b", script, re.MULTILINE)
    assert "set -e" in script  # a failing test fails CI


def test_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("setup", "test", "test-fast", "train-swe", "eval-swe", "bench", "lint"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), target


def _readme_commands() -> list[str]:
    """Every command line in the README: fenced code lines and `inline code` that starts with a command."""
    text = (ROOT / "README.md").read_text()
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL) for line in block.splitlines()]
    lines += re.findall(r"`((?:make|python|\.venv/bin/python) [^`]+)`", text)
    return lines


def test_readme_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = {t for line in _readme_commands() for t in re.findall(r"\bmake ([a-z][\w-]*)", line)}
    assert {"train-swe", "test", "eval-swe"} <= targets
    for target in targets:
        assert re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE), f"README names `make {target}`"


def test_readme_python_modules_exist():
    modules = {m for line in _readme_commands() for m in re.findall(r"python -m ([\w.]+)", line)}
    assert {"trainer.train", "evals.swe"} <= modules
    for module in modules - BENCH_PLACEHOLDERS:
        path = ROOT / Path(*module.split("."))
        main = path / "__main__.py" if path.is_dir() else path.with_suffix(".py")
        assert main.is_file(), f"README names `python -m {module}`"


BENCH_PLACEHOLDERS = {"bench.perf.NAME", "bench.experiments.NAME"}
"""The README's stand-ins for any bench/perf/<name>.py and bench/experiments/<name>.py."""


def test_readme_bench_modules_exist():
    """Every benchmark the README names (its table names them without `python -m`) is a module."""
    named = set(re.findall(r"`(?:python -m )?(bench\.(?:perf|experiments)\.\w+)", (ROOT / "README.md").read_text()))
    assert {"bench.perf.sandbox", "bench.experiments.learning"} <= named
    for module in named - BENCH_PLACEHOLDERS:
        assert (ROOT / Path(*module.split("."))).with_suffix(".py").is_file(), f"README names `{module}`"


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text()):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def test_readme_config_fields_and_eval_flags_exist():
    import subprocess
    import sys

    text = (ROOT / "README.md").read_text()
    fields = subprocess.run([sys.executable, "-m", "trainer.train", "--help"], capture_output=True, text=True, cwd=ROOT)
    named = set(re.findall(r"\b([a-z_]+\.[a-z_]+(?:\.[a-z_]+)?)=", text)) - {"section.field"}
    assert "tasks.source" in named
    for field in named:
        assert f"  {field}=" in fields.stdout, f"README sets `{field}`, which `trainer.train --help` does not list"
    flags = subprocess.run([sys.executable, "-m", "evals.swe", "--help"], capture_output=True, text=True, cwd=ROOT)
    for flag in set(re.findall(r'ARGS="(--[a-z-]+)', text)):
        assert flag in flags.stdout, f"README passes `{flag}`, which `evals.swe --help` does not list"


def test_the_fast_tier_selects_no_test_of_the_tiers_it_leaves_out():
    """`make test-fast`'s selection, collected as it runs it: no test on the shared Ray
    cluster (the `ray` marker is added at collection, and must be there before `-m` selects:
    when it was added after, the fast tier ran the training tests and took 11 minutes, not
    3), and the long tests first in the full suite's order."""
    import subprocess
    import sys

    fast = re.search(r"^FAST := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert fast is not None
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    collect.append("tests/trainer/test_orchestrator.py")
    selected = subprocess.run([*collect, "-m", fast.group(1)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    everything = subprocess.run(collect, cwd=ROOT, capture_output=True, text=True, timeout=300)
    ids = [line for line in everything.stdout.splitlines() if "::" in line]
    uses_ray = "tests/trainer/test_orchestrator.py::test_vigor_in_deterministic_mode_resumes_to_the_same_trajectories_and_params"
    assert uses_ray in ids  # it takes the ray_cluster fixture
    assert uses_ray not in selected.stdout
    # In the full suite's order, the file's `ray` tests (all it leaves out) come before the rest.
    fast_ids = [line for line in selected.stdout.splitlines() if "::" in line]
    assert fast_ids and ids[-len(fast_ids) :] == fast_ids
