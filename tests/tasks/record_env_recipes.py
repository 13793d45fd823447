"""Record each Verified spec's environment recipe from real clones, for CI (which cannot fetch).

    .venv/bin/python -m tests.tasks.record_env_recipes --repo-cache ~/swe-repos

For the first row of every (repository, version) of SWE-bench Verified, runs
`tasks.swebench_env.row_environment` against its clone in the cache, recording what it read
from the clone (files at commits, which commits the clone has, `git describe`) and what it
made (the sandbox definition and the repository edits, or the reason it cannot be met), in
`tests/fixtures/verified_env_recipes.json`. `tests/tasks/test_env_recipes.py` replays the
reads and asserts the same recipe, so a change to how any repository family's environment
is made shows in CI as the spec it changes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import tasks.swebench_env as swebench_env
from tasks.repos import find_clone
from tasks.spec import TaskError

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT.parent / "shared" / "data" / "swe_bench_verified.jsonl"
FIXTURE = ROOT / "tests" / "fixtures" / "verified_env_recipes.json"
# What of a row the recipe reads (the rest, problem statements and patches, is left out).
ROW_FIELDS = ("instance_id", "repo", "version", "base_commit", "environment_setup_commit", "created_at")


def record(row: dict, cache: Path) -> dict:
    reads: dict[str, object] = {}
    real = (swebench_env.file_at, swebench_env.has_commit, swebench_env.describe)

    def file_at(clone, commit, path):
        reads[f"file {commit} {path}"] = text = real[0](clone, commit, path)
        return text

    def has_commit(clone, commit):
        reads[f"has {commit}"] = found = real[1](clone, commit)
        return found

    def describe(clone, commit):
        reads[f"describe {commit}"] = found = real[2](clone, commit)
        return found

    entry: dict[str, object] = {"row": {k: row.get(k, "") for k in ROW_FIELDS}}
    swebench_env.file_at, swebench_env.has_commit, swebench_env.describe = file_at, has_commit, describe
    try:
        clone = find_clone(cache, row["repo"], row["base_commit"], row["instance_id"])
        definition, edits = swebench_env.row_environment(row, clone, row["instance_id"])
        entry.update(definition=definition, edits=list(edits))
    except TaskError as exc:
        entry["unavailable"] = str(exc).replace(str(cache), "CACHE")
    finally:
        swebench_env.file_at, swebench_env.has_commit, swebench_env.describe = real
    entry["reads"] = reads
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo-cache", type=Path, required=True)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.dataset.read_text().splitlines() if line.strip()]
    firsts: dict[str, dict] = {}
    for row in rows:
        firsts.setdefault(f"{row['repo']} {row['version']}", row)
    recipes = {spec: record(row, args.repo_cache.expanduser()) for spec, row in sorted(firsts.items())}
    FIXTURE.write_text(json.dumps(recipes, indent=1, sort_keys=True) + "\n")
    print(f"{len(recipes)} specs recorded in {FIXTURE}")


if __name__ == "__main__":
    main()
