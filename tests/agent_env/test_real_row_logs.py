"""Grading on logs recorded from real SWE-bench Verified rows (not constructed).

Recorded by `python -m tasks validate` on real clones of pallets/flask and psf/requests
(`tests/fixtures/real_rows/`, the gold-patch run of each; the requests log is the part the
sandbox keeps of its 1.2 MB, trimmed further to its first failures, the drop line and its
end; the lines an in-process runner guard of an earlier grader added are dropped on reading).
They pin what a real log must give: every required test of flask's gold run read as passed,
and a row whose required tests fail only for want of the network named as such from those
tests' own failures (requests).
"""

from __future__ import annotations

import json
from pathlib import Path

from agent_env.grading import network_failure
from tasks.log_parsers import log_parser

FIXTURES = Path(__file__).parents[1] / "fixtures" / "real_rows"
ROWS = {
    json.loads(line)["instance_id"]: json.loads(line) for line in (FIXTURES / "rows.jsonl").read_text().splitlines()
}


def recorded(instance: str) -> tuple[str, dict]:
    """The log (without the old guard's lines) and the row."""
    log = (FIXTURES / f"{instance}.gold.log").read_text()
    return "\n".join(line for line in log.splitlines() if not line.startswith("@@agentic-rl-guard")), ROWS[instance]


def required(row: dict) -> list[str]:
    return json.loads(row["FAIL_TO_PASS"]) + json.loads(row["PASS_TO_PASS"])


def test_flask_5014_gold_run_reads_every_required_test_passed():
    log, row = recorded("pallets__flask-5014")
    statuses = log_parser("swebench", "pallets/flask")(log)
    assert {test: statuses.get(test) for test in required(row)} == dict.fromkeys(required(row), "PASSED")
    assert len(required(row)) == 60
    assert network_failure(log, statuses, required(row)) is None


def test_requests_1724_gold_run_needs_the_network_by_its_required_tests():
    log, row = recorded("psf__requests-1724")
    statuses = log_parser("swebench", "psf/requests")(log)
    failed = sorted(test for test in required(row) if statuses.get(test) == "FAILED")
    assert len(failed) == 41 and not [t for t in required(row) if t not in statuses]
    verdict = network_failure(log, statuses, required(row))
    assert verdict == (
        "test_requests.py::RequestsTestCase::test_BASICAUTH_TUPLE_HTTP_200_OK_GET: "
        "err = gaierror(-3, 'Temporary failure in name resolution')"
    )
