"""VIGOR against a fixed group size at an equal rollout budget (issue #20).

    python -m bench.experiments.vigor [--steps N] [--seeds 3] [--group-size 4] [--prompts 4] [--out DIR]
                                      [--json PATH] [--config configs/train_swe_oneturn.yaml] [key=value ...]

Two arms of GRPO on the `make train-swe` recipe (the config's tasks and settings otherwise):

- **fixed**: every prompt of a step gets `--group-size` G rollouts (`algorithm.allocation=fixed`);
- **vigor**: the same budget per step, `--prompts` x G rollouts, spread by VIGOR
  (`algorithm.allocation=vigor`, `trainer.algorithms.vigor`) with the paper's defaults
  (`algorithm.vigor`: m0=2, alpha=0.5, gamma=2, rounds=4): 2 per prompt first, then rounds
  that go to the prompts with the highest reward variance so far.

Both arms play `--prompts` groups (`orchestrator.episodes_per_step`) of G rollouts' budget per
step, so the same episodes per step, for the same steps, each with GRPO's own loss aggregation
(`bench.experiments.common.COMMON`). Each seed has one supervised warm start
(`common.TrainingRunner.warm_start`), shared by both arms; each arm starts from it. The runner
evaluates before and after RL when the config does (`evaluation.episodes`, fixed seeds).

Per arm, as the mean and population std over seeds (`arm_row`): the informative-group
fraction (mean `nonzero_variance_fraction` over steps: groups whose rewards are not all
equal, the only ones GRPO learns from), training success after half and all of the run's
rollouts (`success_at`: the episode-weighted success over the trailing `--window` steps),
training success in the first and last third, the evaluation before and after, rollouts per
prompt (mean over steps, largest in any step) and `budget_spent` (rollouts played over the
fixed budget, mean over steps). Training success under VIGOR is measured on the prompts it
chose to sample most, so the evaluation is the unbiased comparison (docs/vigor-bench.md).

Outputs: `--out` holds the runs (`runs/warm-s<seed>/`, `runs/<arm>-s<seed>/`), `curves.json`
(per arm and seed: cumulative rollouts, success and informative fraction per step),
`vigor.png` and `setting.json`; `--json` gets the table's figures. Resumes
(`common.TrainingRunner.arm`): the same command with the same `--out` keeps the warm starts
and the finished runs and continues an unfinished run from its newest checkpoint.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path

from bench.experiments.common import (
    COMMON,
    TrainingRunner,
    experiment_parser,
    finished,
    flat_spreads,
    keep_one_setting,
    moving_average,
    read_records,
    read_summary,
    run_experiment,
    save_figure,
    spread_cell,
    spreads,
    thirds,
)

logger = logging.getLogger(__name__)

ARMS: dict[str, list[str]] = {
    "fixed": ["algorithm.allocation=fixed"],  # G rollouts for every prompt
    "vigor": ["algorithm.allocation=vigor"],  # the same budget in variance-guided rounds, the paper's defaults
}
GROUP_SIZE = 4
"""Default G: VIGOR needs a budget above m0=2 per prompt to have anything to allocate."""
PROMPTS = 4
"""Default prompts (groups) per step: the suite's four tasks' worth, 16 rollouts per step at G=4."""
WINDOW = 5
"""Steps in the trailing window of `success_at`."""
FIGURES = (
    "informative_fraction",
    "success_half",
    "success_all",
    "first_success",
    "final_success",
    "eval_before",
    "eval_after",
    "rollouts_per_prompt_mean",
    "rollouts_per_prompt_max",
    "budget_spent",
)
"""The per-run figures `arm_row` averages over seeds."""
QUIET = ["run.checkpoint_every=10", "run.samples_every=10"]
"""Settings for every run, before the user's overrides."""


def arm_settings(arm: str, group_size: int, prompts: int) -> list[str]:
    """One arm's overrides: GRPO, `prompts` groups per step with a budget of `group_size`
    rollouts each, the arm's allocation, GRPO's own loss aggregation."""
    return ["algorithm.name=grpo", f"algorithm.group_size={group_size}",
            f"orchestrator.episodes_per_step={prompts}", *ARMS[arm], *COMMON]  # fmt: skip


def steps_of(records: list[dict]) -> list[dict]:
    """The step records that played episodes, in step order."""
    return sorted((r for r in records if "step" in r and r.get("episodes")), key=lambda r: r["step"])


def success_curve(records: list[dict]) -> list[tuple[int, float, int]]:
    """(cumulative rollouts, training success, episodes) after each step that played some."""
    curve, total = [], 0
    for record in steps_of(records):
        total += record["episodes"]
        curve.append((total, float(record.get("success_rate", 0.0)), record["episodes"]))
    return curve


def success_at(curve: list[tuple[int, float, int]], rollouts: int, window: int = WINDOW) -> float | None:
    """Training success after `rollouts` rollouts: the episode-weighted success of the
    `window` steps ending at the first step whose cumulative rollouts reach `rollouts`
    (None if the run never got there)."""
    end = next((i for i, (total, _, _) in enumerate(curve) if total >= rollouts), None)
    if end is None:
        return None
    points = curve[max(0, end + 1 - window) : end + 1]
    return round(sum(s * n for _, s, n in points) / sum(n for _, _, n in points), 6)


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 6) if values else None


def run_figures(records: list[dict], summary: dict, window: int = WINDOW) -> dict:
    """One run's figures from its metrics.jsonl records and summary.json (see the module
    docstring; None where the run has no such value)."""
    steps = steps_of(records)
    curve = success_curve(records)
    total = curve[-1][0] if curve else 0
    first, final = thirds([s for _, s, _ in curve]) if curve else (None, None)

    def values(key: str) -> list[float]:
        return [r[key] for r in steps if isinstance(r.get(key), int | float)]

    def evaluation(key: str) -> float | None:
        return summary[key]["success_rate"] if key in summary else None

    maxima = values("rollouts_per_prompt_max")
    return {
        "steps": len(steps),
        "rollouts": total,
        "informative_fraction": _mean(values("nonzero_variance_fraction")),
        "success_half": success_at(curve, (total + 1) // 2, window) if curve else None,
        "success_all": success_at(curve, total, window) if curve else None,
        "first_success": None if first is None else round(first, 6),
        "final_success": None if final is None else round(final, 6),
        "eval_before": evaluation("eval_before"),
        "eval_after": evaluation("eval_after"),
        "rollouts_per_prompt_mean": _mean(values("rollouts_per_prompt_mean")),
        "rollouts_per_prompt_max": max(maxima) if maxima else None,
        "budget_spent": _mean(values("budget_spent")),
    }


def arm_row(arm: str, runs: dict[int, dict]) -> dict:
    """One arm's row: for each of `FIGURES` the mean and population std over the seeds'
    `run_figures` (`runs`: seed -> figures; seeds without the figure are left out)."""
    rollouts = sorted({r["rollouts"] for r in runs.values()})
    return {"arm": arm, "seeds": sorted(runs), "rollouts": rollouts, **spreads(runs.values(), FIGURES)}


def markdown(rows: list[dict]) -> str:
    """The report: one line per arm, each figure as mean ± std over seeds."""

    lines = [
        "| arm | informative groups | success after N/2 → N rollouts | success first → last third "
        "| eval before → after | rollouts/prompt mean | rollouts/prompt max | budget spent |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        n = "/".join(str(v) for v in r["rollouts"])
        lines.append(
            f"| {r['arm']} | {spread_cell(r, 'informative_fraction')} | {spread_cell(r, 'success_half')} → "
            f"{spread_cell(r, 'success_all')} (N={n}) | {spread_cell(r, 'first_success')} → {spread_cell(r, 'final_success')} "
            f"| {spread_cell(r, 'eval_before')} → {spread_cell(r, 'eval_after')} | {spread_cell(r, 'rollouts_per_prompt_mean', '.2f')} "
            f"| {spread_cell(r, 'rollouts_per_prompt_max', '.1f')} | {spread_cell(r, 'budget_spent')} |"
        )
    return "\n".join(lines)


def curves(records: list[dict]) -> dict[str, list]:
    """Per step that played episodes: step, cumulative rollouts, training success and
    informative fraction (None where a step lacks it)."""
    steps = steps_of(records)
    return {
        "step": [r["step"] for r in steps],
        "rollouts": [total for total, _, _ in success_curve(records)],
        "success_rate": [r.get("success_rate") for r in steps],
        "nonzero_variance_fraction": [r.get("nonzero_variance_fraction") for r in steps],
    }


def _mean_by_position(series: list[list]) -> list[float | None]:
    length = min((len(s) for s in series), default=0)
    columns = [[s[i] for s in series if s[i] is not None] for i in range(length)]
    return [statistics.fmean(c) if c else None for c in columns]


def plot(data: dict[str, dict[int, dict[str, list]]], path: Path, window: int = WINDOW) -> Path:
    """Draw `vigor.png`: left, training success (trailing `window`-step mean) against
    cumulative rollouts; right, the informative-group fraction per step. One line per arm,
    the mean over seeds, each seed faint behind it. `data`: arm -> seed -> `curves`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (arm, seeds) in enumerate(data.items()):
        colour = colours[index % len(colours)]
        for key, ax in (("success_rate", left), ("nonzero_variance_fraction", right)):
            series = []
            for seed_curves in seeds.values():
                points = [
                    (x, y) for x, y in zip(seed_curves["rollouts"], seed_curves[key], strict=True) if y is not None
                ]
                ys = [y for _, y in points]
                ys = moving_average(ys, window) if key == "success_rate" else ys
                xs = [x for x, _ in points] if ax is left else list(range(1, len(ys) + 1))
                ax.plot(xs, ys, color=colour, alpha=0.25, linewidth=1)
                series.append(list(zip(xs, ys, strict=True)))
            if series:
                xs = [x for x, _ in min(series, key=len)]
                ys = _mean_by_position([[y for _, y in s] for s in series])
                ax.plot(xs, ys, color=colour, linewidth=2, marker=".", label=f"{arm} (mean over seeds: {len(series)})")
    left.set_title(f"training success ({window}-step mean) vs rollouts", fontsize=10)
    left.set_xlabel("cumulative rollouts")
    right.set_title("informative-group fraction (nonzero reward variance)", fontsize=10)
    right.set_xlabel("RL step")
    fig.suptitle("VIGOR vs fixed group size at an equal rollout budget", fontsize=11)
    return save_figure(fig, [left, right], path)


# -- running ----------------------------------------------------------------------------------


def bench(args: argparse.Namespace) -> dict[str, dict[int, Path]]:
    """Per seed the warm start (`TrainingRunner.warm_start`, trained once), then each arm from
    it (`TrainingRunner.arm`: kept when finished, resumed from its newest checkpoint when not).
    Returns arm -> seed -> the run's folder."""

    def done(arm: str, seed: int, folder: Path) -> None:
        figures = run_figures(read_records(folder), read_summary(folder), args.window)
        logger.info("%s seed %d: informative fraction %s, training success %s -> %s, eval %s -> %s", arm, seed,
                    figures["informative_fraction"], figures["first_success"], figures["final_success"],
                    figures["eval_before"], figures["eval_after"])  # fmt: skip

    runner = TrainingRunner(args.config, [*QUIET, *args.overrides], args.out, args.steps)
    return runner.arms(args.seeds, {arm: arm_settings(arm, args.group_size, args.prompts) for arm in ARMS}, done)


def write_results(folders: dict[str, dict[int, Path]], args: argparse.Namespace) -> dict:
    """`curves.json` and `vigor.png` in `--out`, the table printed; returns the figures for `--json`."""
    runs = {arm: {seed: run_figures(read_records(f), read_summary(f), args.window) for seed, f in seeds.items()}
            for arm, seeds in folders.items()}  # fmt: skip
    data = {arm: {seed: curves(read_records(f)) for seed, f in seeds.items()} for arm, seeds in folders.items()}
    (args.out / "curves.json").write_text(json.dumps({"window": args.window, "arms": data, "runs": runs}) + "\n")
    chart = plot(data, args.out / "vigor.png", args.window)
    rows = [arm_row(arm, seeds) for arm, seeds in runs.items()]
    table = markdown(rows)
    print(table)
    logger.info("curves: %s  plot: %s", args.out / "curves.json", chart)
    return {"seeds": args.seeds, "group_size": args.group_size, "prompts": args.prompts, **flat_spreads(rows, FIGURES)}


def kept(args: argparse.Namespace) -> str:
    """The line an interrupted bench ends with: what `--out` keeps and how to go on."""
    warm = [s for s in range(args.seeds) if finished(args.out / "runs" / f"warm-s{s}", 0)]
    runs = sorted(p.name for p in (args.out / "runs").glob("*-s*") if not p.name.startswith("warm-"))
    return (f"warm starts of seeds {warm or 'none'} and runs so far ({', '.join(runs) or 'none'}; unfinished ones "
            f"resume from their newest checkpoint) kept in {args.out}; run the same command again to continue")  # fmt: skip


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = experiment_parser(
        "vigor",
        "GRPO with VIGOR's variance-guided rollout allocation (the paper's m0=2, alpha=0.5, "
        "gamma=2, 4 rounds) against GRPO with a fixed group size G, at the same rollouts per step, over "
        "seeds, each seed from one shared supervised warm start. Reports per arm, as mean ± std over "
        "seeds: the informative-group fraction, training success after N/2 and N rollouts and per third, "
        "the evaluation before and after RL, rollouts per prompt (mean, max) and the budget spent; "
        "writes vigor.png (success vs rollouts, informative fraction per step). Long: with the defaults "
        "(configs/train_swe_oneturn.yaml, 40 steps of 16 rollouts, 3 seeds) 3 warm starts and 6 runs of 6-7 "
        "minutes: 41 minutes on 2 cores (measured, docs/vigor-bench.md). A rerun with the same --out resumes.",
        "python -m bench.experiments.vigor --seeds 3 --out runs/bench-vigor   |   smoke: python -m "
        "bench.experiments.vigor --config configs/train_swe_quick.yaml --steps 1 --seeds 1 --prompts 2 --out "
        "/tmp/vigor-smoke warm_start.steps=2 evaluation.episodes=2",
        config="configs/train_swe_oneturn.yaml",
        out=Path("runs/bench-vigor"),
        out_help="runs, curves.json and vigor.png",
    )
    parser.add_argument("--steps", type=int, default=None, help="RL steps per run (default: the config's run.steps)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1, one warm start each (default 3)")
    parser.add_argument(
        "--group-size", type=int, default=GROUP_SIZE, help=f"G, rollouts per prompt (default {GROUP_SIZE})"
    )
    parser.add_argument("--prompts", type=int, default=PROMPTS, help=f"prompts per step (default {PROMPTS})")
    parser.add_argument("--window", type=int, default=WINDOW, help=f"steps in success_at's window (default {WINDOW})")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.prompts < 1 or args.window < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--seeds, --prompts, --window and --steps must be at least 1")
    if args.group_size < 3:
        parser.error("--group-size must be at least 3: at 2, VIGOR's first round (m0=2) spends the whole budget")
    return args


def check_setting(args: argparse.Namespace) -> None:
    """`--out` holds runs of one setting (config, overrides, steps, G, prompts): refuse another.
    More seeds later are fine: the finished ones are kept."""
    setting = {"config": args.config, "overrides": args.overrides, "steps": args.steps,
               "group_size": args.group_size, "prompts": args.prompts}  # fmt: skip
    keep_one_setting("bench.experiments.vigor", args.out, setting)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run_experiment(
        "vigor", args, [*QUIET, *args.overrides, *arm_settings("vigor", args.group_size, args.prompts)],
        lambda base: check_setting(args), lambda: bench(args), lambda folders, base: write_results(folders, args),
        lambda exc: kept(args),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
