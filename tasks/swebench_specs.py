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
# SWE-Gym's repositories (moto, mypy, pandas, ...), from its fork of the harness; looked at
# for a repository the SWE-bench table does not have (`tasks.training_sets`).
SWEGYM_FILE = Path(__file__).parent / "data" / "swegym_specs.json"
# swebench.harness.constants.NON_TEST_EXTS (unchanged from 4.1.0 to 5.0.2).
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")


@cache
def spec_table() -> dict:
    """The whole table, read once: `specs[repo][version]`, `requirements_paths[repo]`."""
    return json.loads(SPECS_FILE.read_text())


@cache
def swegym_table() -> dict:
    """SWE-Gym's table for its own repositories: `specs[repo][version]`,
    `requirements_paths[repo]`, `log_parsers[repo]` (SWE-Gym/SWE-Bench-Package's
    `swegym/harness/constants.py`, MIT-licensed, its provenance in the file)."""
    return json.loads(SWEGYM_FILE.read_text())


def _entry(repo: str) -> tuple[dict, str]:
    """(the table that has `repo`, its key there): SWE-bench's table, else SWE-Gym's (whose
    harness matches repositories without case), else SWE-bench's (which has none)."""
    if repo not in spec_table()["specs"]:
        gym = next((name for name in swegym_table()["specs"] if name.lower() == repo.lower()), None)
        if gym is not None:
            return swegym_table(), gym
    return spec_table(), repo


def specs_source(repo: str = "") -> str:
    """Where the table for `repo` comes from (the harness release it was taken from)."""
    if _entry(repo)[0] is swegym_table():
        return f"SWE-Gym {swegym_table()['source']} ({SWEGYM_FILE.name})"
    return f"swebench {spec_table()['harness_version']} MAP_REPO_VERSION_TO_SPECS_PY ({SPECS_FILE.name})"


def repo_version_specs(repo: str, version: object) -> dict | None:
    """The specification of `repo` at `version` (python, packages, install, test_cmd, ...),
    or None when neither table has one."""
    table, key = _entry(repo)
    found = table["specs"].get(key, {}).get(str(version))
    return dict(found) if found else None


def requirements_paths(repo: str) -> list[str]:
    """The repository's requirements files the harness reads, in order of preference."""
    table, key = _entry(repo)
    return list(table["requirements_paths"].get(key, []))


def gym_environment_paths(repo: str) -> list[str]:
    """Where SWE-Gym's harness reads `repo`'s conda environment file (its
    `MAP_REPO_TO_ENV_YML_PATHS`), or [] for a repository SWE-Gym does not add."""
    table, key = _entry(repo)
    return list(table["env_yml_paths"].get(key, [])) if table is swegym_table() else []


def gym_log_parser(repo: str) -> str | None:
    """SWE-Gym's parser for `repo` (`pytest` or `pytest_pydantic`), None for another repo."""
    table, key = _entry(repo)
    return table["log_parsers"][key] if table is swegym_table() else None


def test_command(spec: dict) -> str:
    """The spec's test command (the last, when it lists several)."""
    command = spec["test_cmd"]
    return command[-1] if isinstance(command, list) else command


def mypy_selection(row: dict) -> str:
    """python/mypy's rows (SWE-Gym) select their data-driven cases by name: `-k "A or B"`
    over the `[case NAME]` headers of the test patch (SWE-Gym's `make_test_command`)."""
    cases = re.findall(r"\[case ([^\]]+)\]", row.get("test_patch", ""))
    return '"' + " or ".join(cases) + '"'


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
