"""Which of an agent's changes reach the grader: the protected-path rule, as pure functions.

The grader starts from the pristine workspace and applies only the agent's change to the
code under test. Everything else that decides the verdict stays pristine, so a policy
cannot buy reward by editing the tests or the machinery that runs them. A path is
*protected* (the agent's diff of it is dropped before grading) when:

1. it is a test: a directory on its path is named `tests`, `test` or `testing`, or its
   name is `test_*.py`, `*_test.py`, `tests.py` or `conftest.py`;
2. it configures the test runner: `pytest.ini`, `tox.ini`, `.coveragerc`, `noxfile.py`,
   and `setup.cfg` / `pyproject.toml` when the change touches a test-runner section
   (`[tool:pytest]`, `[pytest]`, `[coverage:*]`, `[tool.pytest.*]`, `[tool.coverage.*]`,
   ...); other changes to those two files count;
3. it runs at interpreter start-up or loads into the runner: any `*.pth`,
   `sitecustomize.py`, `usercustomize.py`, and package metadata (`*.dist-info/`,
   `*.egg-info/`, `*.egg-link`), whose entry points pytest loads as plugins;
4. it is new and shadows a module the tests import by name: a top-level module or package
   (at the repository root or directly under `src/`) named like a standard-library module
   or a test runner (`unittest`, `pytest`, `_pytest`, `pluggy`, `nose`, ...);
5. it is compiled bytecode (`__pycache__/`, `*.pyc`: an unchecked-hash .pyc runs without its
   source), anything under `.git/`, or a path that leaves the repository (absolute, `..`);
6. the task's test patch touches it (always, whatever else says);
7. it matches one of the task's `grading.protect` globs; and rules 1-3 do not apply to
   paths matching the task's `grading.unprotect` globs (for repositories whose source has a
   package called `test`, as Django's `django/test/`).

On SWE-bench Verified this rule keeps every file of all 500 gold patches and covers every
file of all 500 test patches (`tests/agent_env/test_protected.py` checks both on the file
lists). The agent may still edit tests while it works: those edits simply never reach the
grader. `tasks/README.md` states the rule for task authors.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TEST_DIRS = frozenset({"tests", "test", "testing"})
TEST_FILE = re.compile(r"^(test_.*\.py|.*_test\.py|tests\.py|conftest\.py)$")
RUNNER_CONFIG = frozenset({"pytest.ini", "tox.ini", ".coveragerc", "noxfile.py"})
STARTUP_FILES = frozenset({"sitecustomize.py", "usercustomize.py"})
MIXED_CONFIG = frozenset({"setup.cfg", "pyproject.toml"})
METADATA_SUFFIXES = (".dist-info", ".egg-info")
RUNNER_MODULES = frozenset(
    {"unittest", "pytest", "_pytest", "pluggy", "py", "nose", "nose2", "doctest", "coverage", "xdist", "conftest"}
)
SHADOWED = frozenset(sys.stdlib_module_names) | RUNNER_MODULES
# Sections of setup.cfg / pyproject.toml that configure how tests run.
_TEST_SECTION = re.compile(
    r"^\s*\[\s*(tool:pytest|pytest|coverage:[^\]]*|tool\.pytest[^\]]*|tool\.coverage[^\]]*|"
    r"tool\.tox[^\]]*|tool:tox|tox[^\]]*|nosetests|tool\.hatch\.envs[^\]]*)\s*\]\s*$"
)


@dataclass(frozen=True)
class FilePatch:
    """One file's section of a git diff."""

    paths: tuple[str, ...]
    """Every path the section's header names (old and new; a rename names two)."""
    text: str
    new_file: bool = False


@dataclass(frozen=True)
class ProtectionRule:
    """A task's rule: the defaults above plus its own globs."""

    test_files: tuple[str, ...] = ()
    """Paths the task's test patch touches: always protected."""
    protect: tuple[str, ...] = ()
    unprotect: tuple[str, ...] = ()
    existing_top: frozenset[str] = frozenset()
    """Top-level names of the pristine repository (a module there is not new, so it shadows nothing)."""
    new_files_anywhere: bool = False
    """A new file may be anywhere, not only inside an existing package (tasks whose outputs
    are files: Harbor tasks, graded by their verifier script)."""


def _unquote(path: str) -> str:
    """A path as git prints it: C-quoted when it has special characters."""
    if len(path) >= 2 and path[0] == '"' and path[-1] == '"':
        raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return raw.encode("latin-1", "replace").decode("utf-8", "replace")
    return path


def _strip_prefix(path: str) -> str | None:
    path = _unquote(path.strip())
    if path == "/dev/null":
        return None
    if path[:2] in ("a/", "b/"):
        return path[2:]
    return path


_HEADER = re.compile(r'^diff --git (?P<a>"(?:[^"\\]|\\.)*"|\S+) (?P<b>"(?:[^"\\]|\\.)*"|\S+)$')
_PATH_LINES = ("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to ")


def split_patch(patch: str) -> tuple[list[FilePatch], str]:
    """A git diff's file sections, and any text before the first one (ignored by git).

    Every path a section's header names is collected (the `diff --git` line, `---`/`+++`,
    renames and copies), so that a section cannot name a protected path in one place and
    a harmless one in another."""
    sections: list[FilePatch] = []
    preamble: list[str] = []
    current: list[str] | None = None

    def close() -> None:
        if current is None:
            return
        paths: list[str] = []
        new_file = False
        header = _HEADER.match(current[0].rstrip("\n"))
        if header:
            paths += [p for p in (_strip_prefix(header["a"]), _strip_prefix(header["b"])) if p is not None]
        else:  # unparseable: keep the raw text as a "path" no rule allows
            paths.append(current[0].rstrip("\n")[len("diff --git ") :] or "?")
        for line in current[1:]:
            if line.startswith("@@") or line.startswith("GIT binary patch"):
                break
            if line.startswith("new file mode"):
                new_file = True
            for prefix in _PATH_LINES:
                if line.startswith(prefix):
                    value = line[len(prefix) :].rstrip("\n")
                    path = _strip_prefix(value) if prefix in ("--- ", "+++ ") else _unquote(value)
                    if path is not None:
                        paths.append(path)
        sections.append(FilePatch(tuple(dict.fromkeys(paths)), "".join(current), new_file))

    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            close()
            current = [line]
        elif current is None:
            preamble.append(line)
        else:
            current.append(line)
    close()
    return sections, "".join(preamble)


def _escapes(path: str) -> bool:
    parts = path.split("/")
    return path.startswith("/") or ".." in parts or ".git" in parts or not path.strip()


def protected_reason(path: str, rule: ProtectionRule, *, is_new: bool = False) -> str | None:
    """Why `path` is protected under `rule` ("test", "runner_config", "startup", "shadowing",
    "outside", "task"), or None when the agent's change to it counts."""
    if _escapes(path):
        return "outside"
    if path in rule.test_files:
        return "test"
    if any(fnmatch.fnmatchcase(path, glob) for glob in rule.protect):
        return "task"
    parts = path.split("/")
    name = parts[-1]
    if any(part.endswith(METADATA_SUFFIXES) for part in parts[:-1]) or name.endswith(".egg-link"):
        return "startup"  # package metadata: entry points load plugins into the runner
    if "__pycache__" in parts or name.endswith((".pyc", ".pyo")):
        return "bytecode"  # Python may run a cached file without reading its source
    if not any(fnmatch.fnmatchcase(path, glob) for glob in rule.unprotect):
        if TEST_DIRS.intersection(parts[:-1]) or TEST_FILE.match(name):
            return "test"
        if name in RUNNER_CONFIG:
            return "runner_config"
        if name in STARTUP_FILES or name.endswith(".pth"):
            return "startup"
    if is_new and _shadows(parts, rule.existing_top):
        return "shadowing"
    return None


def _shadows(parts: list[str], existing_top: frozenset[str]) -> bool:
    """A new top-level module or package (at the root, or directly under src/) whose
    import name is a standard-library module or a test runner."""
    if len(parts) >= 2 and parts[0] == "src":
        parts = parts[1:]
    top = parts[0]
    if top in existing_top:
        return False
    if len(parts) == 1:
        stem, dot, ext = top.rpartition(".")
        if not dot or ext not in ("py", "pyc", "so", "pyd"):
            return False
        top = stem.split(".", 1)[0]  # `foo.cpython-311-x86_64-linux-gnu.so` imports as foo
    return top in SHADOWED


def changes_test_sections(section: FilePatch, original: str) -> bool:
    """Whether a patch of setup.cfg / pyproject.toml changes a test-runner section.

    Judged on the hunks alone, so the grader needs no sandbox: a changed line counts as a
    test-section change when the nearest section header above it (in the hunk, or else the
    one the hunk starts under in `original`) is a test-runner section, or when the line
    itself is such a header."""
    original_lines = original.splitlines()
    for hunk in re.finditer(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@.*\n((?:[ +\-\\].*\n?)*)", section.text, re.M):
        start = int(hunk[1])
        header = None
        for line in reversed(original_lines[: max(0, start - 1)]):
            if re.match(r"^\s*\[", line):
                header = line
                break
        for line in hunk[2].splitlines():
            body = line[1:]
            if re.match(r"^\s*\[", body):
                if line[0] in "+-" and _TEST_SECTION.match(body):
                    return True
                header = body
            if line[:1] in ("+", "-") and header is not None and _TEST_SECTION.match(header):
                return True
    return False


@dataclass(frozen=True)
class Filtered:
    """The agent's patch as the grader applies it, and what was dropped and why."""

    patch: str
    dropped: tuple[tuple[str, str], ...] = ()
    """(path, reason) of each file whose change was dropped."""

    @property
    def reasons(self) -> set[str]:
        return {reason for _, reason in self.dropped}


def filter_patch(
    patch: str, rule: ProtectionRule, read_original: Callable[[str], str] | Mapping[str, str] | None = None
) -> Filtered:
    """Drop every file section of `patch` that touches a protected path.

    `read_original` maps a path to its pristine text (for setup.cfg / pyproject.toml);
    a callable or a mapping; None treats any change to those files as a source change."""
    sections, _ = split_patch(patch)
    kept: list[str] = []
    dropped: list[tuple[str, str]] = []
    for section in sections:
        reason = None
        for path in section.paths:
            reason = protected_reason(path, rule, is_new=section.new_file)
            if reason is None and path.split("/")[-1] in MIXED_CONFIG and read_original is not None:
                original = read_original(path) if callable(read_original) else read_original.get(path, "")
                if changes_test_sections(section, original or ""):
                    reason = "runner_config"
            if reason is not None:
                dropped.append((section.paths[-1], reason))
                break
        if reason is None:
            kept.append(section.text if section.text.endswith("\n") else section.text + "\n")
    return Filtered("".join(kept), tuple(dropped))


BLOCK_OF_REASON = {
    "test": "protected_files",
    "runner_config": "protected_files",
    "startup": "protected_files",
    "bytecode": "protected_files",
    "task": "protected_files",
    "outside": "protected_files",
    "shadowing": "shadowing_module",
}


# -- the result tree --------------------------------------------------------------------------
# What the agent may change in a mixed configuration file, judged on the parsed result: the
# packaging sections. Any other section (a test runner's, or one a parser reads as such:
# `[ tool:pytest ]`, `tool = {pytest = ...}`) changed, added or removed reverts the file.
PACKAGING_SECTIONS = re.compile(r"^(metadata|options(\..*)?|bdist_wheel|sdist|egg_info|build_ext|flake8|isort|mypy.*)$")
PACKAGING_TABLES = frozenset({"project", "build-system"})


def _ini_sections(text: str) -> dict[str, dict[str, str]] | None:
    import configparser

    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except (configparser.Error, ValueError):
        return None
    return {name.strip(): dict(parser.items(name)) for name in parser.sections()}


def _toml_tables(text: str) -> dict | None:
    import tomllib

    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return None


def config_change_allowed(name: str, original: str, new: str) -> bool:
    """Whether a change of setup.cfg / pyproject.toml touches only packaging, judged on both
    versions as parsed (never on hunk headers): `[metadata]`/`[options*]` of setup.cfg,
    `[project]`/`[build-system]` of pyproject.toml. Section header lines must also be the same
    outside those, so that a header one parser reads and another does not cannot slip in."""
    if original == new:
        return True
    if name == "setup.cfg":
        old, fresh = _ini_sections(original), _ini_sections(new)
        allowed = PACKAGING_SECTIONS.match
    else:
        old, fresh = _toml_tables(original), _toml_tables(new)
        allowed = PACKAGING_TABLES.__contains__  # type: ignore[assignment]
    if old is None or fresh is None:
        return False
    for key in set(old) | set(fresh):
        if not allowed(key) and old.get(key) != fresh.get(key):
            return False

    def headers(text: str) -> list[str]:
        return [line.strip() for line in text.splitlines() if line.lstrip().startswith("[")]

    outside = [h for h in headers(original) + headers(new) if not allowed(h.strip("[] \t").strip())]
    return sorted(h for h in headers(original) if h in outside) == sorted(h for h in headers(new) if h in outside)


def result_reason(
    path: str,
    *,
    status: str,
    new_mode: str,
    rule: ProtectionRule,
    pristine: frozenset[str],
    read_both: Callable[[str], tuple[str, str]] | None = None,
) -> str | None:
    """Why a change the agent's patch made to the tree may not reach the tests, judged on the
    result after `git apply` (git's own list of paths and modes), or None when it counts.

    On top of the protected-path rule: no symlink or submodule, no path with a dot-component
    (`.pytest.ini`, `.github/`), a new file only inside an existing package (a directory above
    it holds an `__init__.py` in the pristine tree; no new top-level module), and a mixed
    configuration file changed only in its packaging sections (`config_change_allowed`)."""
    is_new = status == "A"
    reason = protected_reason(path, rule, is_new=is_new)
    if reason is not None:
        return reason
    parts = path.split("/")
    if new_mode in ("120000", "160000"):
        return "symlink"
    if any(part.startswith(".") for part in parts):
        return "dotfile"
    if is_new and not rule.new_files_anywhere:
        packages = {
            "/".join(parts[:cut]) for cut in range(1, len(parts)) if "/".join(parts[:cut]) + "/__init__.py" in pristine
        }
        if not packages:
            return "new_outside_package"
    if parts[-1] in MIXED_CONFIG and status != "D" and read_both is not None:
        original, new = read_both(path)
        if not config_change_allowed(parts[-1], original, new):
            return "runner_config"
    return None


BLOCK_OF_REASON.update(
    {"symlink": "outside_allowlist", "dotfile": "outside_allowlist", "new_outside_package": "outside_allowlist"}
)
