"""SAO against GRPO in SAO's online setting: a task stream whose distribution shifts (issue #20).

    python -m bench.experiments.online [--seeds 3] [--stream online] [--methods sao,grpo,grpo@2.5e-4]
                                       [--group-size 4] [--out DIR] [--json PATH]
                                       [--config configs/train_swe_oneturn.yaml] [key=value ...]

Both methods train on the task stream (`tasks.source=stream:NAME`, `tasks/data/streams/online.yaml`
by default: two families, the two others, phase 1's tasks with their repositories renamed,
stricter hidden tests, phase 1 again) for as many learner steps as the stream has, with the
config's settings otherwise (asynchronous by default):

- **sao**: one rollout per prompt, `orchestrator.episodes_per_step` prompts per step, its critic;
- **grpo**: groups of `--group-size` G rollouts, episodes_per_step / G prompts per step.

So the same rollouts per step for the same steps: an equal rollout budget. Each method runs
at the config's `learner.lr` (tuned for SAO) unless `--methods` gives it its own
(`grpo@2.5e-4`: another arm, `runs/grpo-lr0.00025-s<seed>`). Each seed has one
supervised warm start on every task of the stream (`bench.experiments.common.TrainingRunner`),
shared by both methods. The tiny CPU model cannot discover a renamed API or a stricter fix by
exploration alone, so the warm start shows it each phase's gold once; what the bench
measures is how RL moves success as the phases shift.

Per run, from `metrics.jsonl` (each step's `phase`, success and episodes):

- success per phase occurrence: the episode-weighted training success over its steps;
- **recovery** after each shift: the steps from the start of a phase until the trailing
  `--window`-step success reaches 90% of the previous phase's success at its end (its last
  `--window` steps); None when it never does within the phase;
- **forgetting** when a phase returns: its success at the end of its earlier occurrence minus
  its success over the first `--window` steps of the return (positive: forgotten).

Reported as mean ± std over seeds per method and phase (`markdown`), with `online.png` (success
per step, phases shaded). Resumes: the same command with the same `--out` keeps the warm
starts and finished runs, and continues an unfinished run from its newest checkpoint.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path

from bench.experiments.common import (
    TrainingRunner,
    experiment_parser,
    keep_one_setting,
    kept_runs,
    method_settings,
    moving_average,
    read_records,
    run_experiment,
    save_figure,
    spread,
    spread_cell,
)
from trainer.metrics import phase_spans, shade_phases

logger = logging.getLogger(__name__)

METHODS = ("sao", "grpo")
GROUP_SIZE = 4
WINDOW = 3
"""Steps in the windows of recovery and forgetting."""
RECOVERED = 0.9
"""Recovery: the trailing success reaches this fraction of the previous phase's end."""
QUIET = ["run.checkpoint_every=8", "run.samples_every=8", "evaluation.episodes=0"]
"""Every run: checkpoints and samples at phase ends; no evaluation (the figures are per step)."""


def parse_methods(text: str) -> list[tuple[str, float | None]]:
    """`sao,grpo,grpo@2.5e-4` -> [("sao", None), ("grpo", None), ("grpo", 0.00025)]: each
    method, at the config's learner.lr or its own."""
    methods = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        name, _, lr = item.partition("@")
        if name not in METHODS:
            raise ValueError(f"unknown method {name!r} (known: {', '.join(METHODS)})")
        try:
            value = float(lr) if lr else None
        except ValueError:
            raise ValueError(f"{item!r}: the learning rate after '@' is not a number") from None
        if value is not None and value <= 0:
            raise ValueError(f"{item!r}: the learning rate must be above 0")
        methods.append((name, value))
    if not methods or len(set(methods)) != len(methods):
        raise ValueError("give each method once, e.g. sao,grpo,grpo@2.5e-4")
    return methods


def arm_name(method: str, lr: float | None) -> str:
    """A run's name: the method, and its own learning rate when it has one (`grpo-lr0.00025`)."""
    return method if lr is None else f"{method}-lr{lr:g}"


def occurrences(records: list[dict]) -> list[dict]:
    """The phases a run went through, in order: name, index, steps and per-step
    (success, episodes), from the step records' `phase_index` (records without it are skipped)."""
    found: dict[int, dict] = {}
    for record in sorted((r for r in records if "phase_index" in r), key=lambda r: r["step"]):
        entry = found.setdefault(record["phase_index"], {"name": record["phase"], "index": record["phase_index"],
                                                         "points": []})  # fmt: skip
        if record.get("episodes"):
            entry["points"].append((float(record.get("success_rate", 0.0)), int(record["episodes"])))
            tasks = entry.setdefault("tasks", {})
            for task, episodes in record.get("episodes_by_task", {}).items():
                solved, played = tasks.get(task, (0.0, 0))
                tasks[task] = (solved + record["success_by_task"][task] * episodes, played + episodes)
    return [found[i] for i in sorted(found)]


def weighted(points: list[tuple[float, int]]) -> float | None:
    episodes = sum(n for _, n in points)
    return round(sum(s * n for s, n in points) / episodes, 6) if episodes else None


def recovery_steps(points: list[tuple[float, int]], target: float, window: int = WINDOW) -> int | None:
    """Steps (1-based) until the trailing `window`-step success reaches `target`, or None."""
    for end in range(1, len(points) + 1):
        trailing = weighted(points[max(0, end - window) : end])
        if trailing is not None and trailing >= target - 1e-12:
            return end
    return None


def run_figures(records: list[dict], window: int = WINDOW) -> list[dict]:
    """Per phase occurrence of one run: name, success, its end (last `window` steps),
    recovery after the shift into it, and forgetting (a phase that returns)."""
    phases = occurrences(records)
    out, ends = [], {}
    for position, phase in enumerate(phases):
        points = phase["points"]
        end = weighted(points[-window:])
        row = {"phase": f"{phase['index'] + 1}. {phase['name']}", "name": phase["name"], "steps": len(points),
               "success": weighted(points), "end": end, "recovery": None, "forgetting": None,
               "nothing_to_recover": False,
               "tasks": {t: round(solved / played, 6) for t, (solved, played) in sorted(phase.get("tasks", {}).items())}}  # fmt: skip
        if position > 0 and phases[position - 1]["points"]:
            before = weighted(phases[position - 1]["points"][-window:])
            if before:
                row["recovery"] = recovery_steps(points, RECOVERED * before, window)
            else:  # the previous phase ended at 0: there is nothing to get back to
                row["nothing_to_recover"] = True
        if phase["name"] in ends and points:
            row["forgetting"] = round(ends[phase["name"]] - weighted(points[:window]), 6)
        if end is not None:
            ends[phase["name"]] = end
        out.append(row)
    return out


def method_rows(method: str, runs: dict[int, list[dict]]) -> list[dict]:
    """One row per phase occurrence: mean and population std over seeds of each figure, and
    how many seeds did not recover."""
    rows = []
    for position in range(min((len(r) for r in runs.values()), default=0)):
        cells = [r[position] for r in runs.values()]
        row = {"method": method, "phase": cells[0]["phase"], "seeds": len(cells)}
        for key in ("success", "end", "recovery", "forgetting"):
            row[f"{key}_mean"], row[f"{key}_std"] = spread(c[key] for c in cells)
        row["not_recovered"] = (
            sum(c["recovery"] is None and not c["nothing_to_recover"] for c in cells) if position else 0
        )
        row["nothing_to_recover"] = sum(c["nothing_to_recover"] for c in cells)
        tasks = sorted({t for c in cells for t in c["tasks"]})
        row["tasks"] = {t: round(statistics.fmean(c["tasks"][t] for c in cells if t in c["tasks"]), 4) for t in tasks}
        rows.append(row)
    return rows


def markdown(rows: list[dict], window: int = WINDOW) -> str:
    lines = [
        f"| method | phase | training success | success at its end (last {window} steps) "
        f"| steps to recover 90% | forgetting on return |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        recovery = spread_cell(r, "recovery", ".1f")
        if r["not_recovered"]:
            recovery += f" ({r['not_recovered']}/{r['seeds']} never)"
        if r["nothing_to_recover"]:
            recovery += f" ({r['nothing_to_recover']}/{r['seeds']} from 0)"
        lines.append(f"| {r['method']} | {r['phase']} | {spread_cell(r, 'success')} | {spread_cell(r, 'end')} | "
                     f"{recovery if r['phase'][0] != '1' else '—'} | {spread_cell(r, 'forgetting')} |")  # fmt: skip
    return "\n".join(lines)


def task_table(rows: list[dict]) -> str:
    """Training success per task in each phase (mean over seeds): which task moved."""
    lines = ["| method | phase | training success per task (mean over seeds) |", "|---|---|---|"]
    for r in rows:
        tasks = ", ".join(f"`{t}` {v:.2f}" for t, v in r["tasks"].items()) or "—"
        lines.append(f"| {r['method']} | {r['phase']} | {tasks} |")
    return "\n".join(lines)


def plot(records: dict[str, dict[int, list[dict]]], path: Path, window: int = WINDOW) -> Path:
    """`online.png`: training success per step (trailing `window`-step mean), one line per
    method (mean over seeds, seeds faint), the phases shaded and named."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (method, seeds) in enumerate(records.items()):
        colour = colours[index % len(colours)]
        series = []
        for seed_records in seeds.values():
            steps = sorted((r for r in seed_records if r.get("episodes")), key=lambda r: r["step"])
            xs = [r["step"] for r in steps]
            ys = moving_average([float(r.get("success_rate", 0.0)) for r in steps], window)
            ax.plot(xs, ys, color=colour, alpha=0.25, linewidth=1)
            series.append((xs, ys))
        if series:
            length = min(len(xs) for xs, _ in series)
            mean = [statistics.fmean(ys[i] for _, ys in series) for i in range(length)]
            ax.plot(series[0][0][:length], mean, color=colour, linewidth=2, label=f"{method} (mean of {len(series)})")
    first_run = next((r for seeds in records.values() for r in seeds.values() if r), [])
    shade_phases(ax, phase_spans(first_run))  # every run of a stream has the same phases
    ax.set_xlabel("learner step")
    ax.set_ylabel(f"training success ({window}-step mean)")
    ax.set_ylim(-0.02, 1.02)
    return save_figure(fig, [ax], path, legend="lower right")


# -- running ----------------------------------------------------------------------------------


def bench(args: argparse.Namespace) -> dict[str, dict[int, Path]]:
    """Per seed the warm start (shared), then each method from it (`TrainingRunner.arm`: kept
    when finished, resumed from its newest checkpoint when not). Returns method -> seed -> run folder."""
    from tasks.streams import load_stream

    steps = args.steps or load_stream(args.stream).steps
    overrides = [*QUIET, f"tasks.source=stream:{args.stream}", "tasks.ids=[]", *args.overrides]
    runner = TrainingRunner(args.config, overrides, args.out, steps)
    episodes = runner.base.orchestrator.episodes_per_step
    settings = {
        arm_name(method, lr): method_settings(method, episodes, args.group_size) + ([f"learner.lr={lr}"] if lr else [])
        for method, lr in args.methods
    }
    return runner.arms(args.seeds, settings)


def write_results(folders: dict[str, dict[int, Path]], args: argparse.Namespace) -> dict:
    """`phases.json` and `online.png` in `--out`, the table printed; the figures for `--json`."""
    records = {m: {s: read_records(f) for s, f in seeds.items()} for m, seeds in folders.items()}
    runs = {m: {s: run_figures(r, args.window) for s, r in seeds.items()} for m, seeds in records.items()}
    (args.out / "phases.json").write_text(json.dumps({"window": args.window, "runs": runs}, indent=1) + "\n")
    chart = plot(records, args.out / "online.png", args.window)
    rows = [row for method, seeds in runs.items() for row in method_rows(method, seeds)]
    print(markdown(rows, args.window))
    print()
    print(task_table(rows))
    logger.info("phases: %s  plot: %s", args.out / "phases.json", chart)
    figures: dict = {"seeds": args.seeds, "stream": args.stream, "group_size": args.group_size}
    for row in rows:  # e.g. sao_p3_recovery_mean: SAO, the third phase, steps to recover
        prefix = f"{row['method']}_p{row['phase'].split('.', 1)[0]}"
        for key in ("success", "end", "recovery", "forgetting"):
            figures[f"{prefix}_{key}_mean"] = row[f"{key}_mean"]
            figures[f"{prefix}_{key}_std"] = row[f"{key}_std"]
        figures[f"{prefix}_not_recovered"] = row["not_recovered"]
    return figures


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = experiment_parser(
        "online",
        "SAO (one rollout per prompt, critic) against GRPO (groups of G) on a task stream whose "
        "distribution shifts (tasks/data/streams/online.yaml: families rotate, a repository renames its API, "
        "hidden tests get stricter, an early phase returns), at an equal rollout budget, over seeds, each "
        "seed from one shared warm start. Reports per method and phase, as mean ± std over seeds: training "
        "success, success at the phase's end, steps to recover 90%% of the previous phase's success after "
        "each shift, and forgetting when a phase returns; writes online.png. Long: with the defaults "
        "(configs/train_swe_oneturn.yaml, 40 steps, 3 seeds) 3 warm starts and 6 runs of 3-4 minutes: 30 minutes on 2 "
        "cores (measured, docs/online-bench.md). A rerun with the same --out resumes.",
        "python -m bench.experiments.online --seeds 3 --out runs/bench-online   |   smoke: python -m "
        "bench.experiments.online --config configs/train_swe_quick.yaml --steps 2 --seeds 1 --out /tmp/online-smoke "
        "warm_start.steps=2 evaluation.episodes=0",
        config="configs/train_swe_oneturn.yaml",
        out=Path("runs/bench-online"),
        out_help="runs, phases.json and online.png",
    )
    parser.add_argument("--stream", default="online", help="the task stream (a name or a YAML path; default online)")
    parser.add_argument("--steps", type=int, default=None, help="RL steps per run (default: the stream's phases)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1, one warm start each (default 3)")
    parser.add_argument(
        "--methods",
        default="sao,grpo",
        help="methods to run, each at the config's learner.lr or its own after '@' (default sao,grpo; e.g. "
        "sao,grpo,grpo@2.5e-4). More methods later with the same --out reuse the warm starts",
    )
    parser.add_argument("--group-size", type=int, default=GROUP_SIZE, help=f"GRPO's G (default {GROUP_SIZE})")
    parser.add_argument(
        "--window", type=int, default=WINDOW, help=f"steps in the end/forgetting windows (default {WINDOW})"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.window < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--seeds, --window and --steps must be at least 1")
    try:
        args.methods = parse_methods(args.methods)
    except ValueError as exc:
        parser.error(f"--methods: {exc}")
    if args.group_size < 2:
        parser.error("--group-size must be at least 2 (GRPO learns from differences within a group)")
    return args


def check_setting(args: argparse.Namespace, episodes: int) -> None:
    """An equal rollout budget needs `episodes` (per step) a multiple of GRPO's G; `--out` holds
    runs of one setting (config, overrides, steps, stream, G): refuse another."""
    if episodes % args.group_size:
        sys.exit(f"bench.experiments.online: orchestrator.episodes_per_step ({episodes}) must be a multiple of "
                 f"--group-size ({args.group_size}) for an equal rollout budget")  # fmt: skip
    setting = {"config": args.config, "overrides": args.overrides, "steps": args.steps, "stream": args.stream,
               "group_size": args.group_size}  # fmt: skip
    keep_one_setting("bench.experiments.online", args.out, setting)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run_experiment(
        "online", args, [*QUIET, *args.overrides],
        lambda base: check_setting(args, base.orchestrator.episodes_per_step), lambda: bench(args),
        lambda folders, base: write_results(folders, args), lambda exc: kept_runs(args.out),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
