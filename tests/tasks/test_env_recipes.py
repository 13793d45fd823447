"""Every repository family's environment recipe, on reads recorded from real clones.

`tests/fixtures/verified_env_recipes.json` holds, for the first row of each of Verified's 80
(repository, version) specs, what `tasks.swebench_env.row_environment` read from the row's
real clone (requirements and environment files at their commits, `git describe`) and the
recipe it made on 2026-12-06 (re-record: `python -m tests.tasks.record_env_recipes
--repo-cache ~/swe-repos`). Replaying the reads must give the same recipe, so a change to how
any family's environment is made (pip pins, conda translation, system steps, edits) shows
here as the specs it changes. The recipes were validated by `make verify-verified`
(tasks/README.md, "Measured").
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import tasks.swebench_env as swebench_env
from tasks.spec import TaskError

RECIPES = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "verified_env_recipes.json").read_text())


def test_the_recording_covers_every_spec_of_every_repository_of_verified():
    assert len(RECIPES) == 80
    assert Counter(spec.split()[0] for spec in RECIPES) == {
        "django/django": 9, "sphinx-doc/sphinx": 15, "sympy/sympy": 12, "matplotlib/matplotlib": 6,
        "scikit-learn/scikit-learn": 4, "astropy/astropy": 6, "pydata/xarray": 4, "pytest-dev/pytest": 10,
        "pylint-dev/pylint": 5, "psf/requests": 7, "mwaskom/seaborn": 1, "pallets/flask": 1,
    }  # fmt: skip


@pytest.mark.parametrize("spec", sorted(RECIPES))
def test_each_specs_recipe_is_made_again_from_the_recorded_reads(spec, monkeypatch):
    recorded = RECIPES[spec]
    reads = recorded["reads"]

    def read(key: str):
        assert key in reads, f"{spec}: the recipe now reads {key!r}, which the recording has not (re-record)"
        return reads[key]

    monkeypatch.setattr(swebench_env, "file_at", lambda clone, commit, path: read(f"file {commit} {path}"))
    monkeypatch.setattr(swebench_env, "has_commit", lambda clone, commit: read(f"has {commit}"))
    monkeypatch.setattr(swebench_env, "describe", lambda clone, commit: read(f"describe {commit}"))
    row = recorded["row"]
    if "unavailable" in recorded:
        with pytest.raises(TaskError) as raised:
            swebench_env.row_environment(row, Path("CACHE"), row["instance_id"])
        assert str(raised.value) == recorded["unavailable"]
        return
    definition, edits = swebench_env.row_environment(row, Path("CACHE"), row["instance_id"])
    assert json.loads(json.dumps(definition)) == recorded["definition"]
    assert list(edits) == recorded["edits"]


def _replayed(spec: str, monkeypatch) -> dict:
    reads = RECIPES[spec]["reads"]
    monkeypatch.setattr(swebench_env, "file_at", lambda clone, commit, path: reads[f"file {commit} {path}"])
    monkeypatch.setattr(swebench_env, "has_commit", lambda clone, commit: reads[f"has {commit}"])
    monkeypatch.setattr(swebench_env, "describe", lambda clone, commit: reads[f"describe {commit}"])
    return RECIPES[spec]["row"]


def test_matplotlib_builds_from_the_downloads_folder_what_it_would_fetch(monkeypatch, tmp_path):
    """matplotlib's specs download qhull (a pre_install step) and FreeType 2.6.1 (its own
    setup.py) from hosts other than PyPI: the fetch steps run in the install step, which takes
    the downloads folder's copy of a URL's file, and FreeType is unpacked where setup.py looks
    first. Only the apt step is left a system step, met on a host that has the packages."""
    row = _replayed("matplotlib/matplotlib 3.7", monkeypatch)
    for name in ("qhull-2020-src-8.0.2.tgz", "freetype-2.6.1.tar.gz"):
        (tmp_path / name).write_bytes(b"x")
    definition, _ = swebench_env.row_environment(row, Path("CACHE"), row["instance_id"], downloads=tmp_path)
    python = definition["python"]
    assert python["files"] == [
        {"source": str(tmp_path / "qhull-2020-src-8.0.2.tgz"), "target": "/opt/downloads/qhull-2020-src-8.0.2.tgz"},
        {"source": str(tmp_path / "freetype-2.6.1.tar.gz"), "target": "/opt/downloads/freetype-2.6.1.tar.gz"},
    ]
    assert [s.split(" && ")[-1].split()[:4] for s in python["system"]] == [
        ["DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y"]
    ]
    assert python["system_check"].startswith("dpkg -s imagemagick ffmpeg texlive ")
    install = python["install"][0].splitlines()
    assert install[1:] == [
        swebench_env.FETCH_FUNCTION,
        'QHULL_URL="http://www.qhull.org/download/qhull-2020-src-8.0.2.tgz"',
        'QHULL_TAR="/tmp/qhull-2020-src-8.0.2.tgz"',
        'QHULL_BUILD_DIR="$PWD/build"',
        '_fetch "$QHULL_URL" "$QHULL_TAR"',
        'mkdir -p "$QHULL_BUILD_DIR"',
        'tar -xvzf "$QHULL_TAR" -C "$QHULL_BUILD_DIR"',
        "mkdir -p build && tar -xzf /opt/downloads/freetype-2.6.1.tar.gz -C build",
        "python -m pip install -e .",
    ]
    # Without the files, the steps fetch as upstream's do, and nothing is bound in.
    bare, _ = swebench_env.row_environment(row, Path("CACHE"), row["instance_id"], downloads=tmp_path / "none")
    assert "files" not in bare["python"] and "freetype" not in bare["python"]["install"][0]
    # matplotlib 3.0 builds on the system's FreeType (libfreetype6-dev): nothing to unpack.
    old = _replayed("matplotlib/matplotlib 3.0", monkeypatch)
    definition, _ = swebench_env.row_environment(old, Path("CACHE"), old["instance_id"], downloads=tmp_path)
    assert [f["target"] for f in definition["python"]["files"]] == ["/opt/downloads/qhull-2020-src-8.0.2.tgz"]


def test_host_checks_read_apt_steps_as_the_harness_writes_them():
    step = "apt-get -y update && apt-get -y upgrade && DEBIAN_FRONTEND=noninteractive apt-get install -y a b"
    assert swebench_env._host_check(step) == "dpkg -s a b >/dev/null 2>&1"
    assert swebench_env._host_check("apt-get -y dist-upgrade && apt-get remove x") is None
    assert swebench_env._host_check("curl -O http://x/y") is None
    assert swebench_env.is_workspace_fetch('wget -O "$T" "$U"') and not swebench_env.is_workspace_fetch("wget $U | sh")


def test_requirements_included_through_a_parent_folder_are_read():
    """matplotlib 3.4's requirements/dev/dev-requirements.txt includes `-r ../testing/extra.txt`
    (pandas: test_boxplot_dates_pandas, a PASS_TO_PASS of matplotlib__matplotlib-20826); git
    reads no `..` in a path, so it is resolved first, as the harness's HTTP client did."""
    setup = RECIPES["matplotlib/matplotlib 3.4"]["definition"]["python"]["setup"][1]
    assert "\npandas!=0.25.0\n" in setup and "\npytest-xdist\n" in setup
