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
    for target in ("setup", "test", "train-swe", "eval-swe", "bench", "lint"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), target
