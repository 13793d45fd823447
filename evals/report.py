"""The numbers of a run, as the leaderboard counts them: JSON, Markdown and a PNG chart.

Every instance has one status:
- `resolved` / `unresolved`: graded; unresolved includes a patch that does not apply;
- `empty_patch`: the model submitted nothing (never counted as resolved, as the leaderboard
  counts it; it is graded all the same, and `empty_patch_resolved` counts those whose tests
  pass without a fix: a broken instance, or a grader that `--model empty` exists to catch);
- `error`: infrastructure (no environment, a dead sandbox, a test run past its timeout,
  an inference server that kept failing), never counted as unresolved. Errors because the
  instance cannot run here at all (no repository, an environment that cannot be built:
  the record's `unavailable` says why) are also counted, and marked as not runnable here.
Quarantined instances (flaky under the gold patch, `--validate-gold`) are listed but left
out of every count and rate. Rates are shown over all counted instances (what the
leaderboard reports) and over graded ones (errors excluded), each with a 95% Wilson score
interval (`wilson_interval`). The report also lists every errored instance with its
reason, and names the harness release and the per-(repository, version) specifications
the run used (`run.json`'s `swebench_version` and `harness_specs`), and where the time went
(`sandbox_cost`: sandbox-seconds, starts cold or warm, seconds in the sandbox's start, the
tool calls, grading and the engine, and the shares of wall time waiting on the sandbox and
on the engine; `trainer.inference.cost`), over the instances that recorded it.

Why Wilson and not Clopper-Pearson: both are sound for a binomial rate at the sizes runs
have (tens to 500 instances) and near 0% or 100%, where the normal approximation's
interval leaves [0, 1] or collapses to a point; Clopper-Pearson guarantees at least 95%
coverage by being conservative (wider than needed, most at small n), while Wilson's
coverage is close to 95% on average, and it is a closed form with no dependency (the
exact interval needs the beta distribution's quantiles, i.e. scipy).
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from trainer.inference.cost import cost_summary

log = logging.getLogger(__name__)

STATUSES = ("resolved", "unresolved", "empty_patch", "error")
DIFFICULTIES = ("easy", "medium", "hard")
Z_95 = 1.959963984540054  # the standard normal's 0.975 quantile: a two-sided 95% interval


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial rate (95% by default), rounded to 4 decimals;
    (0.0, 1.0) when there are no trials (nothing is known)."""
    if trials == 0:
        return 0.0, 1.0
    rate = successes / trials
    scale = 1 + z * z / trials
    center = (rate + z * z / (2 * trials)) / scale
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / scale
    return round(max(0.0, center - half), 4), round(min(1.0, center + half), 4)


def status_of(result: dict) -> str:
    """An instance's status from its record (error first: an error has no verdict)."""
    if result.get("error"):
        return "error"
    if not result.get("patch", "").strip():
        return "empty_patch"
    return "resolved" if result["resolved"] else "unresolved"


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def summarize(results: list[dict], quarantined: Iterable[str] = ()) -> dict:
    """Counts by status; rates over counted instances and over graded ones; mean turns and
    tokens over instances that ran (errors excluded)."""
    quarantine = set(quarantined)
    counted = [r for r in results if r.get("instance_id") not in quarantine]
    counts = Counter(r["status"] for r in counted)
    graded = len(counted) - counts["error"]
    ran = [r for r in counted if r["status"] != "error"]
    return {
        "instances": len(results),
        "counted": len(counted),
        **{status: counts[status] for status in STATUSES},
        "unavailable": sum(1 for r in counted if r["status"] == "error" and r.get("unavailable")),
        "empty_patch_resolved": sum(1 for r in counted if r["status"] == "empty_patch" and r.get("resolved")),
        "quarantined": len(results) - len(counted),
        "resolved_rate": counts["resolved"] / len(counted) if counted else 0.0,
        "resolved_rate_ci": list(wilson_interval(counts["resolved"], len(counted))),
        "resolved_rate_of_graded": counts["resolved"] / graded if graded else 0.0,
        "resolved_rate_of_graded_ci": list(wilson_interval(counts["resolved"], graded)),
        "mean_turns": _mean([r.get("turns", 0) for r in ran]),
        "mean_tokens": _mean([r.get("tokens", 0) for r in ran]),
        "mean_policy_tokens": _mean([r.get("policy_tokens", 0) for r in ran]),
        **_rewards(ran),
    }


def _rewards(ran: list[dict]) -> dict:
    """The mean verifier reward (Harbor tasks: a number, not only resolved or not) over the
    instances graded by one, when any was."""
    scored = [r["reward"] for r in ran if isinstance(r.get("reward"), (int, float))]
    return {"mean_reward": round(sum(scored) / len(scored), 4), "rewarded": len(scored)} if scored else {}


def breakdown(results: list[dict], key: str, quarantined: Iterable[str] = ()) -> dict[str, dict]:
    """`summarize` per value of `key` (`repo`, `difficulty`): difficulties easy to hard,
    anything else by name."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for result in results:
        groups[str(result.get(key) or "unknown")].append(result)
    quarantine = set(quarantined)
    rank = {name: i for i, name in enumerate(DIFFICULTIES)}
    names = sorted(groups, key=lambda name: (rank.get(name, len(rank)), name))
    return {name: summarize(groups[name], quarantine) for name in names}


def error_reason(result: dict) -> str:
    """Why an instance errored, in one line: what could not be had here (`unavailable`) or
    the infrastructure error."""
    text = (result.get("unavailable") or result.get("error") or "no reason recorded").strip()
    return text.splitlines()[0] if text else "no reason recorded"


def errored_instances(results: list[dict], quarantined: Iterable[str] = ()) -> list[dict]:
    """Every counted instance that errored: its id, the reason, and whether it cannot run
    here at all (`unavailable`) rather than having failed while running."""
    quarantine = set(quarantined)
    return [
        {"instance_id": r["instance_id"], "reason": error_reason(r), "unavailable": bool(r.get("unavailable"))}
        for r in results
        if r.get("status") == "error" and r["instance_id"] not in quarantine
    ]


def build_report(
    results: list[dict],
    *,
    run: dict,
    quarantine: dict | None = None,
    gold_failures: list[dict] | None = None,
    harness: dict | None = None,
) -> dict:
    """Everything `report.json` holds: the run's settings, the summary, the breakdowns, the
    quarantine and the per-instance statuses."""
    flaky = [q["instance_id"] for q in (quarantine or {}).get("quarantined", [])]
    return {
        **run,
        **summarize(results, flaky),
        "by_repo": breakdown(results, "repo", flaky),
        "by_difficulty": breakdown(results, "difficulty", flaky),
        "graders": dict(Counter(r.get("grader") or "none" for r in results)),
        "sandbox_cost": sandbox_cost(results, flaky),
        "errored_instances": errored_instances(results, flaky),
        "official_harness": harness or {},
        "quarantined_instances": (quarantine or {}).get("quarantined", []),
        "gold_failures": gold_failures or [],
        "instances_status": {
            r["instance_id"]: "quarantined" if r["instance_id"] in flaky else r["status"] for r in results
        },
    }


def sandbox_cost(results: list[dict], quarantined: Iterable[str] = ()) -> dict:
    """`cost_summary` of the counted instances that recorded a cost (`cost`), with how many
    did (`instances`); empty when none did."""
    quarantine = set(quarantined)
    costs = [r["cost"] for r in results if r.get("cost") and r.get("instance_id") not in quarantine]
    return {"instances": len(costs), **cost_summary(costs)} if costs else {}


def _cost_lines(cost: dict) -> list[str]:
    """The report's section on where the time went (nothing without a recorded cost)."""
    if not cost:
        return []
    wall = cost["wall_seconds"]

    def share(seconds: float) -> str:
        return f"{_percent(seconds / wall)}%" if wall > 0 else ""

    rows = [
        (f"sandbox start (mean {cost['sandbox_start_seconds_mean']:.3f} s; {cost['cold_starts']} cold, "
         f"{cost['warm_starts']} warm)", cost["sandbox_start_seconds"]),
        ("tool calls in the sandbox", cost["tool_seconds"]),
        ("grading (final diff and hidden tests)", cost["grading_seconds"]),
        ("- of grading: setup (the diff, its sandbox, the patches)", cost.get("grading_setup_seconds", 0.0)),
        ("- of grading: the verdict run", cost.get("test_run_seconds", 0.0)),
        ("- of grading: the canary twins", cost.get("canary_seconds", 0.0)),
        ("- of grading: closing its sandboxes", cost.get("grading_teardown_seconds", 0.0)),
        ("closing the agent's sandbox", cost.get("close_seconds", 0.0)),
        ("waiting on the engine", cost["engine_seconds"]),
    ]  # fmt: skip
    lines = [
        "## Where the time went",
        "",
        f"Over the {cost['instances']} instance(s) that recorded it: {cost['wall_seconds']:.1f} s of episode "
        f"wall time and {cost['sandbox_seconds']:.1f} sandbox-seconds (agent sandboxes and grading). Waiting "
        f"on the sandbox: {_percent(cost['sandbox_wait_fraction'])}% of the wall time; on the engine: "
        f"{_percent(cost['engine_wait_fraction'])}%.",
        "",
        "| part | seconds | share of wall time |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {seconds:.3f} | {share(seconds)} |" for name, seconds in rows]
    return [*lines, ""]


def quarantine_note(entry: dict) -> str:
    """Why an instance is quarantined, for its row in the report: the recorded reason (not
    gradable offline), or that its gold runs disagreed."""
    return entry.get("reason") or f"flaky: outcomes differ across runs ({', '.join(entry.get('outcomes', []))})"


def _percent(value: float) -> str:
    return f"{100 * value:.1f}"


def _interval(bounds: list[float] | tuple[float, float] | None) -> str:
    return f"{_percent(bounds[0])}–{_percent(bounds[1])}" if bounds else ""


def _cell(text: object) -> str:
    return str(text).replace("|", "/").replace("\n", " ")


def _group_table(title: str, column: str, groups: dict[str, dict]) -> list[str]:
    lines = [
        f"## {title}",
        "",
        f"| {column} | instances | resolved | unresolved | empty patch | error | resolved % | 95% CI "
        "| mean turns | mean tokens |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in groups.items():
        lines.append(
            f"| {name} | {s['counted']} | {s['resolved']} | {s['unresolved']} | {s['empty_patch']} | {s['error']} "
            f"| {_percent(s['resolved_rate'])} | {_interval(s.get('resolved_rate_ci'))} | {s['mean_turns']} "
            f"| {s['mean_tokens']} |"
        )
    return [*lines, ""]


def markdown_report(summary: dict, results: list[dict], model: str, report: dict | None = None) -> str:
    """The report as Markdown: the headline table, breakdowns, quarantine and instances."""
    report = report or {}
    lines = [f"# SWE evaluation: {model}", ""]
    settings = [f"{k}: {report[k]}" for k in ("dataset", "engine", "grader", "workers") if report.get(k) is not None]
    if report.get("swebench_version"):
        settings.append(f"harness: swebench {report['swebench_version']}")
    if settings:
        lines += [" · ".join(settings), ""]
    lines += [
        "| instances | resolved | unresolved | empty patch | error | quarantined | resolved % | resolved % of graded "
        "| 95% CI of resolved % | 95% CI of graded |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {summary['instances']} | {summary['resolved']} | {summary['unresolved']} | {summary['empty_patch']} "
        f"| {summary['error']} | {summary.get('quarantined', 0)} | {_percent(summary['resolved_rate'])} "
        f"| {_percent(summary['resolved_rate_of_graded'])} | {_interval(summary.get('resolved_rate_ci'))} "
        f"| {_interval(summary.get('resolved_rate_of_graded_ci'))} |",
        "",
        "Intervals are 95% Wilson score intervals of the resolved rate (over counted instances, and over graded ones).",
        "",
    ]
    if summary["empty_patch"]:
        lines += [
            f"Empty patches are graded too: {summary.get('empty_patch_resolved', 0)} of {summary['empty_patch']} "
            "resolve (one that does is an instance whose tests pass without a fix).",
            "",
        ]
    if summary.get("rewarded"):
        lines += [
            f"Mean verifier reward {summary['mean_reward']} over the {summary['rewarded']} instance(s) a verifier "
            "script graded (its reward file: partial credit counts).",
            "",
        ]
    lines += [
        f"Mean turns {summary.get('mean_turns', 0)}, mean tokens {summary.get('mean_tokens', 0)} "
        f"({summary.get('mean_policy_tokens', 0)} generated) over the instances that ran. Errors are "
        "infrastructure failures, never counted as unresolved; quarantined instances are left out of every count.",
        "",
    ]
    graders = report.get("graders")
    if graders:
        lines += ["Graded by: " + ", ".join(f"{k} {v}" for k, v in sorted(graders.items())), ""]
    harness = report.get("official_harness") or {}
    if harness.get("summary"):
        lines += [f"Official harness: {harness['summary']}", ""]
    lines += _cost_lines(report.get("sandbox_cost") or {})
    if report.get("by_repo"):
        lines += _group_table("By repository", "repository", report["by_repo"])
    if report.get("by_difficulty"):
        lines += _group_table("By difficulty", "difficulty", report["by_difficulty"])
    errored = report.get("errored_instances") or []
    if errored:
        unrunnable = sum(1 for e in errored if e["unavailable"])
        lines += [
            f"## Errored instances ({len(errored)})",
            "",
            f"Never counted as unresolved. {unrunnable} cannot run here (their repository or environment "
            f"cannot be had on this machine; the reason names the part that failed), {len(errored) - unrunnable} "
            "had an infrastructure error.",
            "",
            "| instance | kind | reason |",
            "|---|---|---|",
        ]
        lines += [
            f"| {e['instance_id']} | {'not runnable here' if e['unavailable'] else 'infrastructure'} "
            f"| {_cell(e['reason'])[:300]} |"
            for e in errored
        ]
        lines.append("")
    specs = report.get("harness_specs") or {}
    if specs:
        lines += [
            "## Harness specifications used",
            "",
            f"Per repository and version, from {next(iter(specs.values())).get('source', 'the harness')}.",
            "",
            "| repository | version | instances | python | install | test command |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {spec['repo']} | {spec['version']} | {spec.get('instances', 0)} | {spec.get('python', '')} "
            f"| `{_cell(spec.get('install', ''))}` | `{_cell(spec.get('test_cmd', ''))}` |"
            for spec in specs.values()
        ]
        lines.append("")
    if report.get("quarantined_instances"):
        lines += [
            "## Quarantined (flaky: results differ across runs; or not gradable offline)",
            "",
            "| instance | outcomes | reason |",
            "|---|---|---|",
        ]
        lines += [
            f"| {q['instance_id']} | {', '.join(q['outcomes'])} | {_cell(quarantine_note(q))} |"
            for q in report["quarantined_instances"]
        ]
        lines.append("")
    if report.get("gold_failures"):
        lines += ["## Gold patch does not resolve", "", "| instance | outcomes | failing tests |", "|---|---|---|"]
        for g in report["gold_failures"]:
            failing = ", ".join(g.get("failed_tests", [])[:5]) + (" …" if len(g.get("failed_tests", [])) > 5 else "")
            lines.append(f"| {g['instance_id']} | {', '.join(g['outcomes'])} | {_cell(failing)} |")
        lines.append("")
    lines += ["## Instances", "", "| instance | status | turns | note |", "|---|---|---|---|"]
    # A quarantined instance is shown as such, with why: its own verdict is not counted.
    quarantined = {q["instance_id"]: quarantine_note(q) for q in report.get("quarantined_instances", [])}
    for r in results:
        status = "quarantined" if r["instance_id"] in quarantined else r["status"]
        note = _cell(quarantined.get(r["instance_id"]) or r.get("error") or r.get("note") or "")[:240]
        lines.append(f"| {r['instance_id']} | {status} | {r.get('turns', 0)} | {note} |")
    return "\n".join(lines) + "\n"


def write_chart(report: dict, path: Path) -> Path | None:
    """A PNG: stacked status counts per repository and per difficulty. Without matplotlib
    (not a declared dependency yet) it says so and writes nothing: the numbers are in the
    JSON and Markdown reports."""
    try:
        import matplotlib  # lazy: heavy, and only reports need it
    except ImportError:
        log.warning("matplotlib is not installed: no chart at %s", path)
        return None

    matplotlib.use("Agg")  # no display; must precede pyplot
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    colors = {"resolved": "#2e7d32", "unresolved": "#c62828", "empty_patch": "#9e9e9e", "error": "#f9a825"}
    panels = [("by repository", report.get("by_repo", {})), ("by difficulty", report.get("by_difficulty", {}))]
    height = max(2.5, 0.45 * sum(len(groups) for _, groups in panels) + 1.5)
    figure, axes = plt.subplots(2, 1, figsize=(8, height), squeeze=False)
    for axis, (title, groups) in zip(axes[:, 0], panels, strict=True):
        names = list(groups)
        left = [0] * len(names)
        for status in STATUSES:
            values = [groups[n][status] for n in names]
            axis.barh(names, values, left=left, color=colors[status], label=status.replace("_", " "))
            left = [a + b for a, b in zip(left, values, strict=True)]
        for row, name in enumerate(names):
            axis.text(left[row], row, f" {_percent(groups[name]['resolved_rate'])}%", va="center", fontsize=8)
        axis.set_title(f"{report.get('model', '')}: {title}", fontsize=10)
        axis.invert_yaxis()
        axis.set_xlabel("instances")
        axis.set_xlim(0, max(left, default=0) * 1.2 + 1)  # room for the rate labels
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
