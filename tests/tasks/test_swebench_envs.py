"""SWE-bench rows without a registry: workspaces from a repository cache, environments from
the harness's install specification, and what cannot be met, reported as such.

The rows are real Verified rows (tests/fixtures) over a repository made here (see
`swebench_repo`), since no upstream repository can be fetched. The environment build
(Python 3.9 from pyenv, pip from the package index) is cached by content in a folder that
outlives the session, so it costs its ~40 s once per machine.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from agent_env import ToolEnv, grade_patch, prepare_environment
from tasks import load_sources, load_task_set
from tasks.repos import clone_candidates, find_clone
from tasks.spec import TaskError
from tasks.swebench import load_swebench, row_to_task
from tasks.swebench_env import LOCALE_CHECK, is_repository_edit, row_environment
from tests.conftest import needs_bwrap
from tests.tasks import swebench_repo as repo

ENV_CACHE = Path(tempfile.gettempdir()) / "agentic-rl-test-envs"


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A repository cache holding the test repository as psf/requests (owner__name layout)."""
    root = tmp_path_factory.mktemp("repo-cache")
    commits = repo.make_clone(root / "psf__requests")
    return root, commits


def test_clones_are_found_in_either_layout_and_missing_ones_named(tmp_path, cache):
    root, commits = cache
    assert find_clone(root, "psf/requests", commits["base"], "row") == root / "psf__requests"
    nested = tmp_path / "psf" / "requests"
    nested.parent.mkdir()
    git(root / "psf__requests", "clone", "-q", "--bare", str(root / "psf__requests"), str(nested))
    assert find_clone(tmp_path, "psf/requests", commits["base"], "row") == nested
    with pytest.raises(TaskError) as missing:
        find_clone(tmp_path, "pallets/flask", commits["base"], "rows.jsonl:4 (pallets__flask-5014)")
    message = str(missing.value)
    assert "rows.jsonl:4 (pallets__flask-5014)" in message and "no clone of pallets/flask" in message
    assert all(str(p) in message for p in clone_candidates(tmp_path, "pallets/flask"))
    with pytest.raises(TaskError, match=r"lack commit 0{40}"):
        find_clone(root, "psf/requests", "0" * 40, "row")


def test_workspace_is_the_base_commit_alone(cache):
    root, commits = cache
    clone = root / "psf__requests"
    head_before = git(clone, "rev-parse", "HEAD")
    task = row_to_task(repo.requests_row(commits), "rows.jsonl:1", root)
    assert not task.unavailable and task.workspace_is_repo
    work = task.workspace
    assert git(work, "log", "--all", "--oneline").count("\n") == 1  # nothing newer, nothing older
    assert git(work, "rev-parse", "HEAD^{tree}") == git(clone, "rev-parse", f"{commits['base']}^{{tree}}")
    assert git(work, "tag") == "" and git(work, "remote") == "" and git(work, "reflog") == ""
    assert git(work, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]
    assert git(work, "status", "--porcelain") == ""
    # No object of the future is in the store (nothing to dig up with cat-file or fsck).
    fixed_blob = git(clone, "rev-parse", f"{commits['future']}:requests/models.py").strip()
    for obj in (commits["future"], fixed_blob, commits["first"]):
        assert subprocess.run(["git", "cat-file", "-e", obj], cwd=work).returncode != 0
    every = git(work, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    assert sorted(every) == sorted(line.split()[0] for line in git(work, "rev-list", "--objects", "--all").splitlines())
    # The clone is left as it was; the workspace is cached by (repository, commit).
    assert git(clone, "rev-parse", "HEAD") == head_before and git(clone, "status", "--porcelain") == ""
    made = (work / ".git").stat().st_ino  # a rebuild renames a fresh checkout into place
    assert row_to_task(repo.requests_row(commits), "rows.jsonl:1", root).workspace == work
    assert (work / ".git").stat().st_ino == made


def test_rows_without_a_usable_clone_say_which_row_and_path(tmp_path, cache):
    root, commits = cache
    rows = repo.write_rows(tmp_path / "rows.jsonl", [{**repo.requests_row(commits), "base_commit": "1" * 40}])
    (task,) = load_swebench(rows, repo_cache=root)
    assert task.workspace is None and f"{rows}:1 (psf__requests-1142)" in task.unavailable
    assert "lack commit 1111" in task.unavailable and str(root / "psf__requests") in task.unavailable
    (task,) = load_swebench(rows)  # no cache at all: it says to give one
    assert "--repo-cache" in task.unavailable
    with pytest.raises(TaskError, match="no such folder"):
        load_task_set(str(rows), repo_cache=tmp_path / "nope")


def test_a_resumed_run_makes_no_workspace_for_the_rows_it_has_graded(tmp_path, cache, monkeypatch, capsys):
    """`validate --out DIR` again: a row with a verdict there is named, not checked out
    (over Verified, the checkouts take tens of GB); `--redo` checks it out to grade it."""
    from agent_env.__main__ import main
    from agent_env.validate_run import RowRecord, append_record

    monkeypatch.setenv("AGENTIC_RL_CACHE", str(tmp_path / "cache"))
    root, commits = cache
    rows = repo.write_rows(tmp_path / "rows.jsonl", [repo.requests_row(commits)])
    out = tmp_path / "run"
    out.mkdir()
    graded = RowRecord(
        task_id="psf__requests-1142", repo="psf/requests", version="1.1", status="failed", fail_to_pass=1,
        pass_to_pass=5, env_seconds=1.0, env_built=False, test_seconds=1.0,
    )  # fmt: skip
    append_record(out / "results.jsonl", graded)
    assert main(["validate", str(rows), "--repo-cache", str(root), "--out", str(out)]) == 1  # its FAIL stands
    assert "0/1 tasks valid, 1 failed" in capsys.readouterr().out
    workspaces = tmp_path / "cache" / "workspaces" / "git"
    assert not workspaces.exists() or not any(workspaces.iterdir())
    (named,) = load_sources([str(rows)], root, no_checkout=frozenset({"psf__requests-1142"}))
    assert named.workspace.parent == workspaces and not named.workspace.exists()
    (task,) = load_swebench(rows, repo_cache=root)  # as `--redo failed` loads it: checked out, there
    assert task.workspace == named.workspace and (task.workspace / ".git").is_dir()


def test_the_harness_spec_becomes_pip_steps_for_its_python(cache):
    root, commits = cache
    definition, edits = row_environment(repo.requests_row(commits), root / "psf__requests", "row")
    python = definition["python"]
    assert python["version"] == "3.9" and edits == ()  # requests 1.1's spec, not the host's 3.11
    assert python["setup"][1] == "python -m pip install pytest"  # conda's `packages`, by pip
    install = python["install"][0]
    assert install.endswith("python -m pip install .")
    # setuptools-scm's version from the clone's tags (the one-commit workspace has none).
    assert "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_REQUESTS=1.0.1.dev1+g" + commits["base"][:7] in install


def test_repository_edits_of_pre_install_are_committed_in_the_workspace(tmp_path):
    """sphinx 3.5's pre_install edits tox.ini (`pytest -rA`, which the log parser needs) and
    setup.py; they are part of the one commit, as the harness commits them."""
    clone = tmp_path / "cache" / "sphinx-doc__sphinx"
    clone.mkdir(parents=True)
    (clone / "tox.ini").write_text("[testenv]\ncommands=\n    pytest --durations 25 {posargs}\n")
    (clone / "setup.py").write_text("install_requires = ['Jinja2>=2.3', 'packaging',]\n")
    git(clone, "init", "-q", "-b", "main")
    git(clone, "add", "-A")
    subprocess.run(
        ["git", "commit", "-qm", "base"], cwd=clone, env={**repo.GIT_ENV, "PATH": "/usr/bin:/bin"}, check=True
    )
    row = {**repo.real_row("sphinx-doc__sphinx-8621"), "base_commit": git(clone, "rev-parse", "HEAD").strip()}
    task = row_to_task(row, "row", tmp_path / "cache")
    assert not task.unavailable, task.unavailable
    assert "pytest -rA --durations" in (task.workspace / "tox.ini").read_text()
    assert "Jinja2<3.0" in (task.workspace / "setup.py").read_text()
    assert git(task.workspace, "status", "--porcelain") == ""
    assert task.grading.test_command.startswith("tox --current-env -epy39 -v --")
    # Pygments released since the harness's images changes the HTML sphinx's tests compare.
    setup = row_environment(row, clone, "row")[0]["python"]["setup"]
    assert (
        setup[-1] == "python -m pip install --no-build-isolation 'pygments<2.19' 'docutils<0.22' 'docutils<0.18'"
    )  # sphinx 3.5
    from tasks.swebench_env import drift_pins

    assert (
        drift_pins("sphinx-doc/sphinx", "4.0")
        == drift_pins("sphinx-doc/sphinx", "7.2")
        == ["pygments<2.19", "docutils<0.22"]
    )
    assert drift_pins("sphinx-doc/sphinx", "3.10") == [
        "pygments<2.19",
        "docutils<0.22",
        "docutils<0.18",
    ]  # numbers, not text
    assert (
        drift_pins("astropy/astropy", "3.1") == ["astropy-helpers==4.0.*"]
        and drift_pins("astropy/astropy", "3.10") == []
    )
    assert drift_pins("psf/requests", "2.0") == []
    # Cython 3 for scikit-learn 0.20-0.22 only (1.3 and later pin cython==3.0.10 themselves).
    assert drift_pins("scikit-learn/scikit-learn", "0.22") == ["python-dateutil<3", "cython<3", "pytest<7"]
    assert drift_pins("scikit-learn/scikit-learn", "1.3") == ["python-dateutil<3"]


def test_rows_whose_data_expire_run_at_their_own_date():
    from tasks.swebench_env import clock_variables

    row = {"repo": "astropy/astropy", "version": "4.3", "created_at": "2022-03-31T16:30:00Z"}
    clock = clock_variables(row)
    assert (clock["FAKETIME"], clock["DONT_FAKE_MONOTONIC"]) == ("@2022-03-31 00:00:00", "1")
    assert clock["LD_PRELOAD"].endswith("-linux-gnu/faketime/libfaketime.so.1")
    assert clock_variables({**row, "version": "5.1"}) == {}  # its table was still valid: not dated
    assert clock_variables({**row, "created_at": ""}) == {}  # no date, no clock
    assert clock_variables({**row, "repo": "psf/requests"}) == {}


def test_step_classification():
    assert is_repository_edit("sed -i 's/pytest/pytest -rA/' tox.ini")
    assert is_repository_edit(
        "grep -q 'x>=2' setup.py && sed -i 's/x>=2/x>=2,<3/' setup.py || sed -i 's/x/x<3/' setup.py"
    )
    assert not is_repository_edit("sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen")
    assert not is_repository_edit("apt-get update && apt-get install -y graphviz")
    assert not is_repository_edit('mkdir -p "$QHULL_BUILD_DIR"')


def _clone_for(tmp_path: Path, repository: str, files: dict[str, str]) -> tuple[Path, str]:
    clone = tmp_path / "cache" / repository.replace("/", "__")
    clone.mkdir(parents=True)
    for name, text in {"README": "x\n", **files}.items():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text(text)
    git(clone, "init", "-q", "-b", "main")
    git(clone, "add", "-A")
    subprocess.run(
        ["git", "commit", "-qm", "base"], cwd=clone, env={**repo.GIT_ENV, "PATH": "/usr/bin:/bin"}, check=True
    )
    return tmp_path / "cache", git(clone, "rev-parse", "HEAD").strip()


XARRAY_ENV = """name: xarray-tests
channels:
  - conda-forge
dependencies:
  - python=3.10
  - conda-forge::boto3
  - cdms2
  - hdf5
  - iris
  - matplotlib-base
  - numpy
  - pandas
  - bottleneck=1.3
  - pip
  - pip:
    - numbagg
    - -e ../..
"""


def test_conda_environment_files_are_translated_to_pip_with_the_harness_pins_in_one_run(tmp_path):
    """xarray's rows build a conda environment from ci/requirements/environment.yml: here its
    dependencies become pip requirements (renamed, C libraries the wheels bundle dropped,
    conda-only ones named as left out), installed with the spec's pins in one resolver run."""
    root, base = _clone_for(tmp_path, "pydata/xarray", {"ci/requirements/environment.yml": XARRAY_ENV})
    row = {**repo.real_row("pydata__xarray-6938"), "base_commit": base, "environment_setup_commit": base}
    task = row_to_task(row, "row", root)
    assert task.unavailable == "" and task.workspace is not None
    setup = task.sandbox["python"]["setup"]
    assert setup[1] == (
        "# conda-only, left out: cdms2\n"
        "python -m pip install boto3 scitools-iris matplotlib 'bottleneck==1.3.*' numbagg numpy==1.23.0 "
        "packaging==23.1 pandas==1.5.3 pytest==7.4.0 python-dateutil==2.8.2 pytz==2023.3 six==1.16.0 "
        "scipy==1.11.1 setuptools==68.0.0 dask==2022.8.1"
    )
    # A clone without the file: the row says which files it looked for, where.
    root, base = _clone_for(tmp_path / "b", "pydata/xarray", {})
    task = row_to_task({**row, "base_commit": base, "environment_setup_commit": base}, "row", root)
    assert task.workspace is None and "none of the conda environment files" in task.unavailable
    assert "ci/requirements/environment.yml" in task.unavailable


def test_conda_package_specs_as_pip_requirements():
    from tasks.swebench_env import CONDA_TO_PIP, _pip_requirement

    assert _pip_requirement("bottleneck=1.3") == "bottleneck==1.3.*"  # conda's `=`
    # numpy 1.19.2 has no wheel for Python 3.9 and no longer builds (scikit-learn 1.3's list).
    assert _pip_requirement("numpy==1.19.2") == "numpy>=1.19.2,==1.19.*"
    assert _pip_requirement("scipy==1.5.2") == "scipy>=1.5.2,==1.5.*"
    assert _pip_requirement("setuptools==38.2.4") == "setuptools==38.2.4"  # others stay exact
    assert (CONDA_TO_PIP["dask-core"], CONDA_TO_PIP["gtk4"], CONDA_TO_PIP["hdf5"]) == ("dask", None, "")


def test_requirements_come_from_the_clone_and_system_steps_need_a_host_that_has_them(tmp_path):
    """django 3.0: requirements from the clone's tests/requirements/py3.txt (its `-r`
    includes followed), and eval_commands that generate a locale: root in an image; the
    local backend takes them as met only where the host has the locale."""
    root, base = _clone_for(tmp_path, "django/django", {})
    row = {**repo.real_row("django__django-11119"), "base_commit": base}
    task = row_to_task(row, "row", root)
    assert "tests/requirements/py3.txt" in task.unavailable and task.workspace is None
    root, base = _clone_for(
        tmp_path / "b", "django/django",
        {"tests/requirements/py3.txt": "-r base.txt\nPillow >= 6.2.0\n", "tests/requirements/base.txt": "asgiref\n-e .\n"},
    )  # fmt: skip
    row = {**row, "base_commit": base, "environment_setup_commit": "2" * 40}  # absent: base_commit's files
    task = row_to_task(row, "row", root)
    python = task.sandbox["python"]
    assert python["version"] == "3.6" and "asgiref" in python["setup"][1] and "Pillow >= 6.2.0" in python["setup"][1]
    assert "-e ." not in python["setup"][1]
    assert python["system"] == ["sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen"]
    assert python["system_check"] == LOCALE_CHECK and "locales-all" in python["packages"]
    assert task.sandbox["env"]["LANG"] == task.sandbox["env"]["LC_ALL"] == "en_US.UTF-8"
    has_locale = subprocess.run(["bash", "-c", LOCALE_CHECK]).returncode == 0
    prepared = prepare_environment(task, "local")
    if has_locale:
        assert "system" not in prepared.unavailable
    else:
        assert "system step(s)" in prepared.unavailable and "use the docker backend" in prepared.unavailable


def test_a_python_that_pyenv_lacks_is_reported(cache, monkeypatch, tmp_path):
    root, commits = cache
    task = row_to_task(repo.requests_row(commits), "row", root)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    prepared = prepare_environment(task, "local")
    assert prepared.unavailable.startswith("environment cannot be built here: ")
    assert "Python 3.9 is not installed" in prepared.unavailable and "pyenv install 3.9" in prepared.unavailable


@pytest.fixture(scope="module")
def requests_task(cache):
    """The requests row with its environment built for the local backend (cached across
    sessions by content, in ENV_CACHE)."""
    if problem := repo.index_problem():
        pytest.skip(problem)
    root, commits = cache
    patch = pytest.MonkeyPatch()
    patch.setenv("AGENTIC_RL_ENV_CACHE", str(ENV_CACHE))
    try:
        task = row_to_task(repo.requests_row(commits), "rows.jsonl:1", root)
        built = prepare_environment(task, "local")
        assert not built.unavailable, built.unavailable
        yield task, built
    finally:
        patch.undo()


@needs_bwrap
def test_gold_resolves_and_empty_does_not_in_the_built_environment(requests_task):
    _, task = requests_task
    assert task.sandbox["env"]["VIRTUAL_ENV"] == "/opt/venv" and "python" not in task.sandbox
    gold = grade_patch(task, task.gold_patch)
    assert gold.resolved, gold.log[-3000:]
    assert "Python 3.9.18" in gold.log  # the spec's Python, not the host's
    assert gold.statuses == {t: "PASSED" for t in [*repo.FAIL_TO_PASS, *repo.PASS_TO_PASS]}
    empty = grade_patch(task, "")
    assert not empty.resolved and empty.statuses[repo.FAIL_TO_PASS[0]] == "FAILED"
    assert empty.statuses[repo.PASS_TO_PASS[0]] == "PASSED"


@needs_bwrap
def test_the_agent_sees_one_commit_and_the_spec_python(requests_task, monkeypatch):
    original, task = requests_task
    monkeypatch.setenv("AGENTIC_RL_ENV_CACHE", str(ENV_CACHE))
    steps = []
    again = prepare_environment(original, "local", log=steps.append)
    assert again == task and steps == []  # built once, found after: no build step logged
    with ToolEnv(task) as env:
        env.reset()
        run = env.sandbox.exec("git log --all --oneline | wc -l; python --version; python -c 'import requests, pytest'")
        assert run.output.split()[:3] == ["1", "Python", "3.9.18"], run.output
        assert env.sandbox.exec("touch /opt/venv/x").exit_code != 0  # the environment is read-only
        # The interpreter run through a link of its own (what `tox --current-env` does, the
        # sphinx rows' test command) still sees the environment's packages.
        linked = env.sandbox.exec(
            'mkdir -p /tmp/tox/bin && ln -s "$(command -v python)" /tmp/tox/bin/python && '
            "/tmp/tox/bin/python -c 'import requests, pytest; print(pytest.__file__)'"
        )
        assert linked.exit_code == 0 and linked.output.startswith("/opt/venv/lib/python3.9/"), linked.output
        attack = env.sandbox.exec(repo.USER_SITE_ATTACK)
        assert attack.output.split() == repo.USER_SITE_DEFENDED, attack.output


@needs_bwrap
def test_validate_cli_over_rows(requests_task, cache, tmp_path, capsys, monkeypatch):
    """`python -m agent_env validate rows.jsonl --repo-cache DIR`: the requests row is valid; a
    row whose clone is not in the cache is not runnable here, with the reason."""
    from agent_env.__main__ import main

    monkeypatch.setenv("AGENTIC_RL_ENV_CACHE", str(ENV_CACHE))
    root, commits = cache
    rows = repo.write_rows(tmp_path / "rows.jsonl", [repo.requests_row(commits), repo.real_row("pallets__flask-5014")])
    assert main(["validate", str(rows), "--repo-cache", str(root)]) == 3  # none failed, one not runnable here
    out = capsys.readouterr().out
    assert "ok    psf__requests-1142" in out
    assert "n/a   pallets__flask-5014: not runnable here:" in out and "no clone of pallets/flask" in out
    assert "1/2 tasks valid, 1 not runnable here" in out


@needs_bwrap
def test_a_step_that_fails_is_reported_with_its_part_and_output(requests_task, cache, monkeypatch):
    """A package the index does not have (here in the install step, on top of the built
    environment): the task is unavailable, naming the step, with pip's own words."""
    from tasks.swebench_specs import spec_table

    monkeypatch.setenv("AGENTIC_RL_ENV_CACHE", str(ENV_CACHE))
    versions = spec_table()["specs"]["psf/requests"]
    spec = {**versions["1.1"], "install": "python -m pip install agentic-rl-no-such-pkg"}
    monkeypatch.setitem(versions, "1.1", spec)
    root, commits = cache
    task = prepare_environment(row_to_task(repo.requests_row(commits), "row", root), "local")
    assert "install step 1/1" in task.unavailable and "agentic-rl-no-such-pkg" in task.unavailable
    assert "No matching distribution found for agentic-rl-no-such-pkg" in task.unavailable
    assert "exit status 1" in task.unavailable and ".failed.log" in task.unavailable


@needs_bwrap
def test_fetch_steps_take_the_downloads_folders_copy_in_a_sandbox_without_the_network(tmp_path):
    """The harness's qhull steps, as the install step runs them: in a sandbox with no network
    the URL's file comes from the downloads folder (bound read-only, as builds bind
    `python.files`) and is unpacked into the workspace's build/, where matplotlib looks."""
    from sandboxes import SandboxSpec
    from sandboxes.base import Mount
    from sandboxes.local import LocalSandbox
    from tasks.swebench_env import DOWNLOADS_IN_SANDBOX, fetch_script

    source = tmp_path / "src" / "qhull-2020.2"
    source.mkdir(parents=True)
    (source / "README.txt").write_text("qhull\n")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    subprocess.run(
        ["tar", "-czf", downloads / "qhull-2020-src-8.0.2.tgz", "-C", source.parent, "qhull-2020.2"], check=True
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    steps = [
        'QHULL_URL="http://www.qhull.org/download/qhull-2020-src-8.0.2.tgz"',
        'QHULL_TAR="/tmp/qhull-2020-src-8.0.2.tgz"',
        'QHULL_BUILD_DIR="/testbed/build"',
        'wget -O "$QHULL_TAR" "$QHULL_URL"',
        'mkdir -p "$QHULL_BUILD_DIR"',
        'tar -xvzf "$QHULL_TAR" -C "$QHULL_BUILD_DIR"',
    ]
    script, names = fetch_script(steps)
    assert names == ["qhull-2020-src-8.0.2.tgz"]
    mount = Mount(downloads / names[0], f"{DOWNLOADS_IN_SANDBOX}/{names[0]}")
    with LocalSandbox(SandboxSpec(workspace=workspace, mounts=(mount,))) as sb:
        result = sb.exec(script)
        assert result.ok, result.output
        assert sb.exec("cat build/qhull-2020.2/README.txt").output == "qhull\n"
        # Without the copy, the step fetches the URL, which a sandbox without the network cannot.
        missing = sb.exec(script.replace(names[0], "qhull-other.tgz"))
        assert not missing.ok
