"""The protected-path rule: what of an agent's diff reaches the grader (pure functions)."""

import json
from pathlib import Path

import pytest

from agent_env.grading.protected import (
    ProtectionRule,
    changes_test_sections,
    filter_patch,
    protected_reason,
    split_patch,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"


def _edit(path: str, old: str = "a", new: str = "b") -> str:
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n"


def _new(path: str, line: str = "x = 1") -> str:
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{line}\n"


@pytest.mark.parametrize(
    ("path", "new", "reason"),
    [
        ("pkg/module.py", False, None),
        ("tests/test_x.py", False, "test"),
        ("tests/__init__.py", False, "test"),
        ("pkg/tests/helpers.py", False, "test"),
        ("testing/conftest.py", False, "test"),
        ("conftest.py", False, "test"),
        ("pkg/test_util.py", False, "test"),
        ("pkg/util_test.py", False, "test"),
        ("pytest.ini", False, "runner_config"),
        ("tox.ini", False, "runner_config"),
        ("lib/sitecustomize.py", True, "startup"),
        ("usercustomize.py", True, "startup"),
        ("evil.pth", True, "startup"),
        ("evil-1.0.dist-info/entry_points.txt", True, "startup"),
        ("src/pkg.egg-info/entry_points.txt", False, "startup"),
        ("unittest/__init__.py", True, "shadowing"),
        ("unittest.py", True, "shadowing"),
        ("pytest.py", True, "shadowing"),
        ("src/json/__init__.py", True, "shadowing"),
        ("_pytest/runner.py", True, "shadowing"),
        ("logging.cpython-311-x86_64-linux-gnu.so", True, "shadowing"),
        ("helpers.py", True, None),
        ("pkg/__pycache__/mod.cpython-311.pyc", True, "bytecode"),
        ("pkg/mod.pyc", False, "bytecode"),
        ("docs/json.py", True, None),
        (".git/config", False, "outside"),
        ("pkg/../../etc/passwd", False, "outside"),
        ("/etc/passwd", False, "outside"),
    ],
)
def test_default_rule(path, new, reason):
    assert protected_reason(path, ProtectionRule(), is_new=new) == reason


def test_task_globs_and_test_patch_files():
    rule = ProtectionRule(test_files=("pkg/checks.py",), protect=("fixtures/*",), unprotect=("django/test/*",))
    assert protected_reason("pkg/checks.py", rule) == "test"  # the test patch's files, always
    assert protected_reason("fixtures/data.json", rule) == "task"
    assert protected_reason("django/test/runner.py", rule) is None
    assert protected_reason("django/test/runner.py", ProtectionRule()) == "test"


def test_existing_top_level_modules_shadow_nothing():
    rule = ProtectionRule(existing_top=frozenset({"types"}))
    assert protected_reason("types/extra.py", rule, is_new=True) is None
    assert protected_reason("types/extra.py", ProtectionRule(), is_new=True) == "shadowing"


def test_filter_keeps_source_and_drops_the_rest_whatever_the_order():
    patch = _edit("tests/test_x.py") + _edit("pkg/mod.py") + _new("unittest/__init__.py") + _edit("conftest.py")
    filtered = filter_patch(patch, ProtectionRule())
    assert filtered.patch == _edit("pkg/mod.py")
    assert filtered.dropped == (
        ("tests/test_x.py", "test"),
        ("unittest/__init__.py", "shadowing"),
        ("conftest.py", "test"),
    )


def test_a_section_that_names_a_protected_path_anywhere_is_dropped():
    # The `diff --git` line names source, the `+++` line a test: git would write the test.
    sneaky = "diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/tests/test_x.py\n@@ -1 +1 @@\n-a\n+b\n"
    rename = "diff --git a/pkg/a.py b/pkg/b.py\nsimilarity index 90%\nrename from pkg/a.py\nrename to tests/b.py\n"
    quoted = 'diff --git "a/tests/t\\303\\251st.py" "b/tests/t\\303\\251st.py"\n--- "a/tests/t\\303\\251st.py"\n'
    for text in (sneaky, rename, quoted):
        assert filter_patch(text, ProtectionRule()).patch == ""
    assert split_patch(quoted)[0][0].paths == ("tests/tést.py",)


def test_setup_cfg_counts_unless_a_test_section_changes():
    original = "[metadata]\nname = x\n\n[tool:pytest]\naddopts = -q\n\n[isort]\nline_length = 88\n"
    metadata = (
        "diff --git a/setup.cfg b/setup.cfg\n--- a/setup.cfg\n+++ b/setup.cfg\n"
        "@@ -1,2 +1,2 @@\n [metadata]\n-name = x\n+name = y\n"
    )
    pytest_section = (
        "diff --git a/setup.cfg b/setup.cfg\n--- a/setup.cfg\n+++ b/setup.cfg\n"
        "@@ -5,3 +5,3 @@ [tool:pytest]\n-addopts = -q\n+addopts = -q -p no:python\n \n [isort]\n"
    )
    new_section = (
        "diff --git a/setup.cfg b/setup.cfg\n--- a/setup.cfg\n+++ b/setup.cfg\n"
        "@@ -8,0 +9,2 @@\n+[pytest]\n+addopts = --deselect tests/test_x.py\n"
    )
    isort_only = (
        "diff --git a/setup.cfg b/setup.cfg\n--- a/setup.cfg\n+++ b/setup.cfg\n"
        "@@ -7,2 +7,2 @@\n [isort]\n-line_length = 88\n+line_length = 100\n"
    )
    read = {"setup.cfg": original}
    assert filter_patch(metadata, ProtectionRule(), read).patch == metadata
    assert filter_patch(isort_only, ProtectionRule(), read).patch == isort_only
    assert filter_patch(pytest_section, ProtectionRule(), read).dropped == (("setup.cfg", "runner_config"),)
    assert filter_patch(new_section, ProtectionRule(), read).dropped == (("setup.cfg", "runner_config"),)
    toml = (
        "diff --git a/pyproject.toml b/pyproject.toml\n--- a/pyproject.toml\n+++ b/pyproject.toml\n"
        "@@ -4,1 +4,1 @@ [tool.pytest.ini_options]\n-addopts = ''\n+addopts = '-k nothing'\n"
    )
    assert changes_test_sections(
        split_patch(toml)[0][0], "[project]\nname='x'\n[tool.pytest.ini_options]\naddopts = ''\n"
    )


def test_the_rule_keeps_every_verified_gold_file_and_covers_every_test_file():
    """On the file lists of all 500 SWE-bench Verified rows (recorded in the fixture): no file
    of a gold patch is protected, and every file of a test patch is, by the default rule alone."""
    rows = json.loads((FIXTURES / "swebench_verified_patch_files.json").read_text())
    assert len(rows) == 500
    rule = ProtectionRule()
    gold_blocked = [
        (iid, p)
        for iid, r in rows.items()
        for paths, new in r["gold"]
        for p in paths
        if protected_reason(p, rule, is_new=new)
    ]
    test_allowed = [
        (iid, p) for iid, r in rows.items() for paths in r["test"] for p in paths if not protected_reason(p, rule)
    ]
    assert gold_blocked == []
    assert test_allowed == []
