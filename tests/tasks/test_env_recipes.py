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
