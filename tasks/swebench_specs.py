"""The install and test specification of a SWE-bench row, per (repository, version), offline.

swebench 5 (the pinned harness) no longer ships these: an instance's image, eval script and
log parser are columns of the dataset (the current SWE-bench_Verified revision) or files of a
task repository (`Dockerfile`, `eval.sh`), both fetched from the network. The rows this
project reads offline (`tasks/README.md`) are the older export without those columns, and
the offline environment path (`tasks.swebench_env`) builds from the per-version table. So
that table, `MAP_REPO_VERSION_TO_SPECS_PY` of swebench 4.1.0 (the last release with it), is
kept here as data (`tasks/data/swebench_specs_4.1.0.json`, MIT-licensed, its provenance in
the file), with the two small pure functions of 4.1.0 that read it (`get_test_directives`,
`clean_requirements`). Log parsers and grading come from the pinned swebench 5.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

SPECS_FILE = Path(__file__).parent / "data" / "swebench_specs_4.1.0.json"
# swebench.harness.constants.NON_TEST_EXTS (unchanged from 4.1.0 to 5.0.2).
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")


@cache
def spec_table() -> dict:
    """The whole table, read once: `specs[repo][version]`, `requirements_paths[repo]`."""
    return json.loads(SPECS_FILE.read_text())


def specs_source() -> str:
    """Where the table comes from (the harness release it was taken from)."""
    return f"swebench {spec_table()['harness_version']} MAP_REPO_VERSION_TO_SPECS_PY ({SPECS_FILE.name})"


def repo_version_specs(repo: str, version: object) -> dict | None:
    """The specification of `repo` at `version` (python, packages, install, test_cmd, ...),
    or None when the table has none."""
    found = spec_table()["specs"].get(repo, {}).get(str(version))
    return dict(found) if found else None


def requirements_paths(repo: str) -> list[str]:
    """The repository's requirements files the harness reads, in order of preference."""
    return list(spec_table()["requirements_paths"].get(repo, []))


def test_command(spec: dict) -> str:
    """The spec's test command (the last, when it lists several)."""
    command = spec["test_cmd"]
    return command[-1] if isinstance(command, list) else command


def get_test_directives(row: dict) -> list[str]:
    """The test files (django: test modules) the row's test patch touches: what the harness
    passes to the test command (swebench 4.1.0 `get_test_directives`)."""
    directives = re.findall(r"diff --git a/.* b/(.*)", row.get("test_patch", ""))
    directives = [d for d in directives if not d.endswith(NON_TEST_EXTS)]
    if row["repo"] == "django/django":
        modules = []
        for d in directives:
            d = d[: -len(".py")] if d.endswith(".py") else d
            d = d[len("tests/") :] if d.startswith("tests/") else d
            modules.append(d.replace("/", "."))
        directives = modules
    return directives


def clean_requirements(text: str) -> str:
    """Replace or drop requirements that can no longer be installed (yanked from PyPI), as
    the harness does (swebench 4.1.0 `clean_requirements`)."""
    for package, replacement in spec_table()["replace_requirements"]:
        if replacement is None:
            text = re.sub(rf"^{re.escape(package)}([<>=!~]=?.*|$)\n?", "", text, flags=re.MULTILINE)
        else:
            text = re.sub(rf"^{re.escape(package)}([<>=!~]=?.*|$)", replacement, text, flags=re.MULTILINE)
    return text
