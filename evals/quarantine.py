"""`--validate-gold` and the quarantine: which instances the gold patch fails, and which of those are flaky.

Every instance is run once with its gold patch. Each one that is not resolved is run
`reruns` more times: when its outcomes differ across runs it is flaky, and is quarantined
(written to `quarantine.json`, left out of the resolved rate, listed in the report); when
it fails every time, the gold patch does not resolve it here (a broken instance or
environment), and it is listed as a gold failure, unless a required test failed reaching
for the network (the record's `network_error`, from `agent_env.network_failure`: sandboxes
have none, and e.g. requests' tests call httpbin.org; a network error of a test that passed
or is not required says nothing): then it is not gradable offline, and is quarantined with that reason, so that runs given the quarantine leave it
out instead of counting it unresolved. Errors are infrastructure and say nothing about
flakiness: they are left out of the comparison.
"""

from __future__ import annotations

import json
from pathlib import Path

from evals.store import QUARANTINE, write_json_atomic


def classify(outcomes: list[str]) -> str:
    """`stable_pass`, `stable_fail`, `flaky`, or `error` (no run reached a verdict)."""
    verdicts = {o == "resolved" for o in outcomes if o != "error"}
    if not verdicts:
        return "error"
    if len(verdicts) > 1:
        return "flaky"
    return "stable_pass" if verdicts == {True} else "stable_fail"


def needs_rerun(record: dict) -> bool:
    """A gold run worth repeating: graded, and not resolved (an empty gold patch is not
    flaky: there is nothing to run)."""
    return record["status"] == "unresolved"


def quarantine_entry(instance_id: str, outcomes: list[str], reason: str = "") -> dict:
    entry = {"instance_id": instance_id, "outcomes": outcomes}
    if reason:
        entry["reason"] = reason
    return entry


def build_quarantine(first: dict[str, dict], reruns: dict[str, list[str]], rerun_count: int) -> dict:
    """`quarantine.json`'s content from each instance's first record and its reruns'
    statuses."""
    quarantined, gold_failures = [], []
    for instance_id, record in first.items():
        if record["status"] == "empty_patch":
            gold_failures.append({"instance_id": instance_id, "outcomes": ["empty_patch"], "failed_tests": []})
            continue
        if not needs_rerun(record):
            continue
        outcomes = [record["status"], *reruns.get(instance_id, [])]
        kind = classify(outcomes)
        if kind == "flaky":
            quarantined.append(quarantine_entry(instance_id, outcomes))
        elif kind == "stable_fail" and record.get("network_error"):
            reason = f"not gradable offline: a test needs the network ({record['network_error']})"
            quarantined.append(quarantine_entry(instance_id, outcomes, reason))
        elif kind == "stable_fail":
            failed = record.get("failed_tests", [])
            gold_failures.append({"instance_id": instance_id, "outcomes": outcomes, "failed_tests": failed})
    return {"reruns": rerun_count, "quarantined": quarantined, "gold_failures": gold_failures}


def write_quarantine(output: Path, data: dict) -> Path:
    path = output / QUARANTINE
    write_json_atomic(path, data)
    return path


def read_quarantine(path: Path) -> dict:
    """A `quarantine.json` (from a `--validate-gold` run); errors name the file."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read a quarantine file: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("quarantined"), list):
        raise ValueError(f"{path}: expected an object with a 'quarantined' list")
    return data
