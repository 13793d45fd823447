"""Compare two evaluation runs instance by instance.

    python -m evals.compare RUN_A RUN_B [--output DIR]

Reads each run's `results.jsonl` (the last record of each instance) and prints, as
Markdown, which instances flipped resolved -> not resolved (regressions) and back (fixes),
the counts of each run and the net change; writes `compare.md` and `compare.json` into
`--output` (default: RUN_B). Only instances graded in both runs can flip: an instance
with an error in either run, in only one run, or quarantined (a `quarantine.json` in
either run folder) is listed apart, never counted as a change.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from evals.quarantine import read_quarantine
from evals.report import summarize
from evals.store import QUARANTINE, RESULTS, RunFileError, RunStore, latest_by_instance, read_jsonl
from sandboxes.console import setup_logging

log = logging.getLogger(__name__)


def load_run(folder: Path) -> tuple[dict[str, dict], set[str], dict]:
    """A run's last record per instance, its quarantined ids, and its settings."""
    folder = Path(folder)
    if not (folder / RESULTS).is_file():
        raise RunFileError(f"{folder}: not an evaluation run (no {RESULTS})")
    records = latest_by_instance(read_jsonl(folder / RESULTS))
    quarantine_path = folder / QUARANTINE
    quarantined = (
        {q["instance_id"] for q in read_quarantine(quarantine_path)["quarantined"]}
        if quarantine_path.exists()
        else set()
    )
    return records, quarantined, RunStore(folder).run_info()


def _resolved(record: dict) -> bool:
    return record["status"] == "resolved"


def compare_runs(run_a: Path, run_b: Path) -> dict:
    """The comparison of two runs, as `compare.json` holds it."""
    a, quarantined_a, info_a = load_run(run_a)
    b, quarantined_b, info_b = load_run(run_b)
    quarantined = quarantined_a | quarantined_b
    # In the run's task order (results.jsonl is in finish order), then any others by name.
    rank = {i: n for n, i in enumerate(info_a.get("instances", []))}
    shared = sorted((i for i in a if i in b and i not in quarantined), key=lambda i: (rank.get(i, len(rank)), i))
    # Only a verdict in both runs can flip (not an error, nor a run stopped before grading).
    verdicts = ("resolved", "unresolved", "empty_patch")
    comparable = [i for i in shared if a[i]["status"] in verdicts and b[i]["status"] in verdicts]
    regressions = [i for i in comparable if _resolved(a[i]) and not _resolved(b[i])]
    fixes = [i for i in comparable if not _resolved(a[i]) and _resolved(b[i])]
    other_changes = [
        {"instance_id": i, "a": a[i]["status"], "b": b[i]["status"]}
        for i in comparable
        if a[i]["status"] != b[i]["status"] and i not in regressions and i not in fixes
    ]
    resolved_a = sum(_resolved(a[i]) for i in comparable)
    resolved_b = sum(_resolved(b[i]) for i in comparable)
    return {
        "run_a": {"path": str(run_a), "model": info_a.get("model"), **summarize(list(a.values()), quarantined)},
        "run_b": {"path": str(run_b), "model": info_b.get("model"), **summarize(list(b.values()), quarantined)},
        "comparable": len(comparable),
        "resolved_a": resolved_a,
        "resolved_b": resolved_b,
        "net_change": resolved_b - resolved_a,
        "resolved_to_unresolved": regressions,
        "unresolved_to_resolved": fixes,
        "other_status_changes": other_changes,
        "errors": sorted(i for i in shared if i not in comparable),
        "quarantined": sorted(quarantined & (set(a) | set(b))),
        "only_in_a": sorted(set(a) - set(b)),
        "only_in_b": sorted(set(b) - set(a)),
    }


def _ids(ids: list[str]) -> str:
    return ", ".join(ids) if ids else "none"


def markdown_comparison(data: dict) -> str:
    a, b = data["run_a"], data["run_b"]
    lines = [
        f"# Comparison: {a['model'] or a['path']} (A) -> {b['model'] or b['path']} (B)",
        "",
        "| run | path | instances | resolved | unresolved | empty patch | error | resolved % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, run in (("A", a), ("B", b)):
        lines.append(
            f"| {name} | {run['path']} | {run['counted']} | {run['resolved']} | {run['unresolved']} "
            f"| {run['empty_patch']} | {run['error']} | {100 * run['resolved_rate']:.1f} |"
        )
    lines += [
        "",
        f"On the {data['comparable']} instances graded in both runs: resolved {data['resolved_a']} -> "
        f"{data['resolved_b']}, net change {data['net_change']:+d} "
        f"({len(data['unresolved_to_resolved'])} fixed, {len(data['resolved_to_unresolved'])} regressed).",
        "",
        "| change | count | instances |",
        "|---|---|---|",
        f"| resolved -> unresolved | {len(data['resolved_to_unresolved'])} | {_ids(data['resolved_to_unresolved'])} |",
        f"| unresolved -> resolved | {len(data['unresolved_to_resolved'])} | {_ids(data['unresolved_to_resolved'])} |",
    ]
    others = [f"{c['instance_id']} ({c['a']} -> {c['b']})" for c in data["other_status_changes"]]
    lines.append(f"| other status changes | {len(others)} | {_ids(others)} |")
    lines += [
        "",
        f"Not compared: error in either run: {_ids(data['errors'])}; quarantined: {_ids(data['quarantined'])}; "
        f"only in A: {_ids(data['only_in_a'])}; only in B: {_ids(data['only_in_b'])}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.compare",
        description=__doc__.split("\n")[0],
        epilog="example: python -m evals.compare runs/eval-before runs/eval-after --output flips.md",
    )
    parser.add_argument("run_a", type=Path, help="the baseline run folder")
    parser.add_argument("run_b", type=Path, help="the run compared with it")
    parser.add_argument("--output", type=Path, default=None, help="where compare.md/json go (default: RUN_B)")
    args = parser.parse_args(argv)
    setup_logging()
    try:
        data = compare_runs(args.run_a, args.run_b)
    except (RunFileError, ValueError) as exc:
        log.error("%s", exc)
        return 2
    text = markdown_comparison(data)
    output = args.output or args.run_b
    output.mkdir(parents=True, exist_ok=True)
    (output / "compare.md").write_text(text)
    (output / "compare.json").write_text(json.dumps(data, indent=2) + "\n")
    sys.stdout.write(text)  # the command's result (what is logged goes to stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
