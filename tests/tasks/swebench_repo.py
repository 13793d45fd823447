"""A repository cache for tests: a small requests-shaped repository with history before AND
after the base commit (tags, a remote, another branch), and SWE-bench rows over it.

No upstream repository can be fetched here, so the rows are real Verified rows
(`tests/fixtures/`) whose repository, version and so install specification, test command
and log parser are kept, with `base_commit`, the patches and the tests swapped for this
repository's: the harness's `psf/requests` 1.1 spec (Python 3.9, `pytest` from pip,
`python -m pip install .`, `pytest -rA test_requests.py`) then installs and tests it for real.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
from pathlib import Path

FIXTURES = Path(__file__).parent.parent / "fixtures"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "upstream",
    "GIT_AUTHOR_EMAIL": "upstream@example.invalid",
    "GIT_COMMITTER_NAME": "upstream",
    "GIT_COMMITTER_EMAIL": "upstream@example.invalid",
}
SETUP = 'from setuptools import setup\n\nsetup(name="requests", version="1.1.0", packages=["requests"])\n'
MODELS = (
    "def prepare_headers(method, body=None):\n"
    "    headers = {}\n"
    '    headers["Content-Length"] = "0"\n'
    "    if body is not None:\n"
    '        headers["Content-Length"] = str(len(body))\n'
    "    return headers\n"
)
FIXED = MODELS.replace('    headers["Content-Length"] = "0"\n', "")
TESTS = (
    "import unittest\n\nimport requests\n\n\n"
    "class RequestsTestCase(unittest.TestCase):\n"
    "    def test_body_length(self):\n"
    '        self.assertEqual(requests.prepare_headers("POST", "abc")["Content-Length"], "3")\n'
)
NEW_TEST = (
    "\n    def test_no_content_length(self):\n"
    '        self.assertNotIn("Content-Length", requests.prepare_headers("GET"))\n'
)
FAIL_TO_PASS = ["test_requests.py::RequestsTestCase::test_no_content_length"]
PASS_TO_PASS = ["test_requests.py::RequestsTestCase::test_body_length"]


def diff(path: str, old: str, new: str) -> str:
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
    return f"diff --git a/{path} b/{path}\n{body}"


def _git(root: Path, *args: str, date: str = "2013-01-01T00:00:00Z") -> str:
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout


def _commit(root: Path, files: dict[str, str], message: str, date: str) -> str:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message, date=date)
    return _git(root, "rev-parse", "HEAD").strip()


def make_clone(root: Path) -> dict[str, str]:
    """The repository at `root`: v1.0 -> base -> the fix (tagged v1.1.0, also on a branch),
    with a remote. Returns the commits by name."""
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    first = _commit(
        root, {"setup.py": SETUP, "requests/__init__.py": "from .models import prepare_headers\n",
               "requests/models.py": MODELS.replace("body=None", "body"), "test_requests.py": TESTS,
               ".gitignore": "*.egg-info/\nbuild/\n"},
        "first", "2013-01-01T00:00:00Z",
    )  # fmt: skip
    _git(root, "tag", "v1.0.0")
    base = _commit(root, {"requests/models.py": MODELS}, "body is optional", "2013-01-20T00:00:00Z")
    # Upstream's future: the fix and its test, a release tag, a branch and a remote.
    future = _commit(
        root, {"requests/models.py": FIXED, "test_requests.py": TESTS + NEW_TEST}, "no Content-Length on GET",
        "2013-01-26T00:00:00Z",
    )  # fmt: skip
    _git(root, "tag", "-a", "v1.1.0", "-m", "release 1.1.0")
    _git(root, "branch", "release-1.1")
    _git(root, "remote", "add", "origin", "https://github.com/psf/requests")
    return {"first": first, "base": base, "future": future}


def real_row(instance_id: str) -> dict:
    for name in ("swebench_verified_grading.jsonl", "swebench_verified_sample.jsonl", "swebench_verified_envs.jsonl"):
        for line in (FIXTURES / name).read_text().splitlines():
            row = json.loads(line)
            if row["instance_id"] == instance_id:
                return row
    raise KeyError(instance_id)


def requests_row(commits: dict[str, str]) -> dict:
    """psf__requests-1142 (Verified, requests 1.1), over the test repository."""
    return {
        **real_row("psf__requests-1142"),
        "base_commit": commits["base"],
        "environment_setup_commit": commits["future"],
        "patch": diff("requests/models.py", MODELS, FIXED),
        "test_patch": diff("test_requests.py", TESTS, TESTS + NEW_TEST),
        "FAIL_TO_PASS": json.dumps(FAIL_TO_PASS),
        "PASS_TO_PASS": json.dumps(PASS_TO_PASS),
    }


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def index_problem() -> str | None:
    """Why the package index builds install from cannot be reached, or None."""
    import ssl
    import urllib.request

    from sandboxes.pyenv import pip_settings

    index = pip_settings(for_image=False).variables.get("PIP_INDEX_URL", "https://pypi.org/simple").split()[0]
    cafile = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    try:
        context = ssl.create_default_context(cafile=cafile) if cafile else ssl.create_default_context()
        urllib.request.urlopen(f"{index.rstrip('/')}/pip/", timeout=15, context=context).close()
    except Exception as exc:  # noqa: BLE001 - any failure means no index
        return f"the package index {index} cannot be reached: {exc}"
    return None


# The attack on `PYTHONUSERBASE` (the environment's user site, for an interpreter run through a
# link of its own, as sphinx's `tox --current-env` does), as the agent would try it with its
# shell: plant a `usercustomize` hook in that user site, and one in the workspace, then start
# the linked interpreter and see whether either ran. Printed: the user site, whether the
# plant took, whether a hook ran.
USER_SITE_ATTACK = """
site_dir=$(python -c 'import site; print(site.getusersitepackages())')
echo "$site_dir"
(echo 'open("/tmp/hooked", "w").write("site")' > "$site_dir/usercustomize.py") 2>/dev/null && echo PLANTED || echo REFUSED
echo 'open("/tmp/hooked", "w").write("workspace")' > usercustomize.py
mkdir -p /tmp/tox/bin && ln -sf "$(command -v python)" /tmp/tox/bin/python
/tmp/tox/bin/python -c 'import pytest' && (test -e /tmp/hooked && echo HOOKED || echo CLEAN)
rm -f usercustomize.py
"""
USER_SITE_DEFENDED = ["/opt/venv/lib/python3.9/site-packages", "REFUSED", "CLEAN"]
