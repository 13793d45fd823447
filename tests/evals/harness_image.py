"""Instance images for the official harness, built locally: a small repository whose tests
run with a real pytest, laid out as SWE-bench's images are (the repository at /testbed).

No registry is reachable here, so the published images cannot be pulled. These rows are
SWE-bench rows of `pytest-dev/pytest` 7.2 over a repository of our own, in swebench 5's
form: besides the classic columns they name their `image`, `eval_script` (what the
dataset gives for pytest 7.2: check out the test files, apply the test patch, run
`pytest -rA <test files>` between the output markers, restore the test files),
`log_parser` and `eval_type`. The harness, its log parser and its grading run unchanged;
only the repository and the image differ.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.metadata
import json
import os
import shutil
import subprocess
from pathlib import Path

BASE_IMAGE = "agentic-rl/base:bookworm"
NAMESPACE = "agentic-rl-test"
# pytest and what it imports, copied from this interpreter (pure Python).
PYTEST_DISTRIBUTIONS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}
CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
NEW_TEST = "\n\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def _diff(path: str, old: str, new: str) -> str:
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
    return f"diff --git a/{path} b/{path}\n{body}"


def make_repository(root: Path) -> str:
    """The repository at its base commit; returns the commit."""
    root.mkdir(parents=True)
    (root / "conftest.py").write_text("")  # puts the repository root on sys.path
    (root / "calc.py").write_text(CALC)
    (root / "testing").mkdir()
    (root / "testing" / "test_calc.py").write_text(TESTS)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


def image_name(instance_id: str) -> str:
    """The image a row names, as the published ones are named (swebench 5's `ImageSpec.name`)."""
    return f"{NAMESPACE}/sweb.eval.x86_64.{instance_id}:latest".replace("__", "_1776_").lower()


def eval_script(base_commit: str, test_patch: str, test_files: list[str]) -> str:
    """The eval script of a pytest 7.2 row (the dataset's shape, without conda)."""
    files = " ".join(test_files)
    return "\n".join([
        "#!/bin/bash",
        "set -uxo pipefail",
        "cd /testbed",
        "git status",
        f"git -c core.fileMode=false diff {base_commit}",
        f"git checkout {base_commit} {files}",
        "git apply -v - <<'EOF_114329324912'",
        test_patch.rstrip("\n"),
        "EOF_114329324912",
        ": '>>>>> Start Test Output'",
        f"pytest -rA {files}",
        ": '>>>>> End Test Output'",
        f"git checkout {base_commit} {files}",
    ]) + "\n"  # fmt: skip


def make_rows(base_commit: str) -> list[dict]:
    """Three rows over the repository: a gold patch that resolves, one that does not (it
    breaks `mul`, a PASS_TO_PASS test), and one that does not apply."""
    test_patch = _diff("testing/test_calc.py", TESTS, TESTS + NEW_TEST)
    patches = {
        "pytest-dev__pytest-90001": _diff("calc.py", CALC, CALC.replace("a - b", "a + b")),
        "pytest-dev__pytest-90002": _diff("calc.py", CALC, CALC.replace("a - b", "a + b").replace("a * b", "a**b")),
        # written against another version of the file: neither it nor its reverse applies
        "pytest-dev__pytest-90003": _diff("calc.py", CALC.replace("a - b", "a / b"), CALC.replace("a - b", "a + b")),
    }
    return [
        {
            "repo": "pytest-dev/pytest",
            "instance_id": instance_id,
            "base_commit": base_commit,
            "environment_setup_commit": base_commit,
            "version": "7.2",
            "patch": patch,
            "test_patch": test_patch,
            "problem_statement": "`add` subtracts.",
            "hints_text": "",
            "created_at": "2000-01-01T00:00:00Z",
            "FAIL_TO_PASS": json.dumps(["testing/test_calc.py::test_add"]),
            "PASS_TO_PASS": json.dumps(["testing/test_calc.py::test_mul"]),
            "difficulty": "<15 min fix",
            "image": image_name(instance_id),
            "eval_script": eval_script(base_commit, test_patch, ["testing/test_calc.py"]),
            "log_parser": "parse_log_pytest",
            "eval_type": "pass_and_fail",
        }
        for instance_id, patch in patches.items()
    ]


def _copy_pytest(site: Path) -> None:
    for name in PYTEST_DISTRIBUTIONS:
        distribution = importlib.metadata.distribution(name)
        for file in distribution.files or []:
            source = Path(distribution.locate_file(file))
            if source.is_file() and "__pycache__" not in source.parts and not str(file).startswith(".."):
                target = site / file
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


def build_image(context: Path, repository: Path, tags: list[str]) -> None:
    """Build the instance image from the local base image and tag it once per instance."""
    _copy_pytest(context / "site")
    shutil.copytree(repository, context / "testbed")
    launcher = context / "pytest"
    launcher.write_text("#!/usr/bin/python3\nimport sys\nimport pytest\nsys.exit(pytest.console_main())\n")
    launcher.chmod(0o755)  # COPY keeps the mode (the legacy builder has no --chmod)
    (context / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nUSER root\n"
        "COPY site /usr/local/lib/python3.11/dist-packages\n"
        "COPY pytest /usr/local/bin/pytest\n"
        "COPY testbed /testbed\nWORKDIR /testbed\n"
        # The harness runs `tail -f /dev/null` as PID 1, which ignores SIGTERM: without
        # this, stopping each container waits out docker's 10 s grace period.
        "STOPSIGNAL SIGKILL\n"
    )
    import docker

    client = docker.from_env()
    image, _ = client.images.build(path=str(context), tag=tags[0], rm=True)
    for tag in tags[1:]:
        repository_name, _, version = tag.rpartition(":")
        image.tag(repository_name, version)
    client.close()


def remove_images(tags: list[str]) -> None:
    import docker

    client = docker.from_env()
    for tag in tags:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(tag, force=True)  # a container the harness is still removing holds it
    client.close()
