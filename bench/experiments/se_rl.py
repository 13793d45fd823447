"""SE-RL's loss rebalancing on mixed task families, with and without (issue #20's ablation).

    python -m bench.experiments.se_rl [--seeds 3] [--steps N] [--out DIR] [--json PATH]
                                      [--config configs/train_swe_oneturn.yaml] [key=value ...]

Two arms of SAO on the `make train-swe` recipe (its four tasks are four families: text,
collections, config, numeric), the same in everything but `algorithm.family_weights`:

- **uniform** (`none`): every trajectory's loss counts alike;
- **se_rl** (`se_rl`, `algorithm.se_rl` at its defaults: the `learnability` need, smoothing
  0.9, floor 0.1; `trainer.algorithms.curriculum.FamilyLossWeights`): each family's advantages
  scaled by its weight from earlier steps' needs, weights averaging 1.

Equal budget: the same episodes per step for the same steps. Each seed has one supervised
warm start shared by both arms (`bench.experiments.common.TrainingRunner`), and each arm
evaluates before and after RL on fixed seeds (`evaluation.episodes`).

Per run (`run_figures`), from `summary.json` and `metrics.jsonl`: the evaluation before and
after (all tasks), the evaluation after per family and its worst family (what rebalancing
means to lift), the spread between the best and worst family after, training success in the
first and last third of the steps, and (se_rl) each family's last weight. Per arm: mean ± std
over seeds. The same command with the same `--out` resumes.
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
    flat_spreads,
    keep_one_setting,
    kept_runs,
    read_records,
    read_summary,
    run_experiment,
    spread_cell,
    spreads,
    thirds,
)

logger = logging.getLogger(__name__)

ARMS: dict[str, list[str]] = {
    "uniform": ["algorithm.family_weights=none"],
    "se_rl": ["algorithm.family_weights=se_rl"],
}
QUIET = ["run.checkpoint_every=10", "run.samples_every=10"]
FIGURES = ("eval_before", "eval_after", "worst_family_after", "family_spread_after", "first_success", "final_success")


def arm_settings(arm: str) -> list[str]:
    return ["algorithm.name=sao", "algorithm.group_size=1", *ARMS[arm], *COMMON]


def family_success(per_task: dict[str, float], family_of: dict[str, str]) -> dict[str, float]:
    """Mean success per family of a per-task success map (tasks of unknown family left out)."""
    grouped: dict[str, list[float]] = {}
    for task, success in per_task.items():
        if task in family_of:
            grouped.setdefault(family_of[task], []).append(success)
    return {family: round(statistics.fmean(v), 6) for family, v in sorted(grouped.items())}


def run_figures(records: list[dict], summary: dict, family_of: dict[str, str]) -> dict:
    """One run's figures (see the module docstring; None where the run has no such value)."""
    steps = sorted((r for r in records if r.get("episodes")), key=lambda r: r["step"])
    first, final = thirds([float(r.get("success_rate", 0.0)) for r in steps]) if steps else (None, None)
    after = family_success(summary["eval_after"].get("per_task", {}), family_of) if "eval_after" in summary else {}
    weights = {k.split("/", 1)[1]: v for k, v in (steps[-1] if steps else {}).items() if k.startswith("family_weight/")}
    return {
        "eval_before": summary["eval_before"]["success_rate"] if "eval_before" in summary else None,
        "eval_after": summary["eval_after"]["success_rate"] if "eval_after" in summary else None,
        "family_after": after,
        "worst_family_after": min(after.values()) if after else None,
        "family_spread_after": round(max(after.values()) - min(after.values()), 6) if after else None,
        "first_success": None if first is None else round(first, 6),
        "final_success": None if final is None else round(final, 6),
        "last_weights": weights,
    }


def arm_row(arm: str, runs: dict[int, dict]) -> dict:
    """Mean and population std over seeds of each figure, and of each family's evaluation after."""
    row: dict = {"arm": arm, "seeds": sorted(runs), **spreads(runs.values(), FIGURES)}
    families = sorted({f for r in runs.values() for f in r["family_after"]})
    row["family_after"] = {
        f: round(statistics.fmean(r["family_after"][f] for r in runs.values() if f in r["family_after"]), 4)
        for f in families
    }
    return row


def markdown(rows: list[dict]) -> str:
    lines = [
        "| arm | eval before → after | worst family after | best − worst family after "
        "| training success first → last third | eval after per family (mean over seeds) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        families = ", ".join(f"{f} {v:.2f}" for f, v in r["family_after"].items()) or "—"
        lines.append(
            f"| {r['arm']} | {spread_cell(r, 'eval_before')} → {spread_cell(r, 'eval_after')} | {spread_cell(r, 'worst_family_after')} "
            f"| {spread_cell(r, 'family_spread_after')} | {spread_cell(r, 'first_success')} → {spread_cell(r, 'final_success')} "
            f"| {families} |"
        )
    return "\n".join(lines)


# -- running ----------------------------------------------------------------------------------


def bench(args: argparse.Namespace) -> dict[str, dict[int, Path]]:
    """Per seed the shared warm start, then each arm from it (kept when finished, resumed
    when not). Returns arm -> seed -> run folder."""
    runner = TrainingRunner(args.config, [*QUIET, *args.overrides], args.out, args.steps)
    return runner.arms(args.seeds, {arm: arm_settings(arm) for arm in ARMS})


def families_of(args: argparse.Namespace) -> dict[str, str]:
    from tasks import load_task_set
    from trainer.resolve import load_config

    config = load_config(args.config, [*QUIET, *args.overrides])
    return {t.id: t.family for t in load_task_set(config.tasks.source, config.tasks.ids or None)}


def write_results(folders: dict[str, dict[int, Path]], args: argparse.Namespace) -> dict:
    family_of = families_of(args)
    runs = {
        arm: {seed: run_figures(read_records(f), read_summary(f), family_of) for seed, f in seeds.items()}
        for arm, seeds in folders.items()
    }
    (args.out / "figures.json").write_text(json.dumps(runs, indent=1) + "\n")
    rows = [arm_row(arm, seeds) for arm, seeds in runs.items()]
    print(markdown(rows))
    figures: dict = {"seeds": args.seeds, **flat_spreads(rows, FIGURES)}
    for row in rows:
        for family, value in row["family_after"].items():
            figures[f"{row['arm']}_eval_after_{family}"] = value
    return figures


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = experiment_parser(
        "se_rl",
        "SAO with SE-RL's per-family loss rebalancing (algorithm.family_weights=se_rl) against SAO "
        "without it, on the recipe's mixed task families, at an equal rollout budget, over seeds, each seed "
        "from one shared warm start. Reports per arm, as mean ± std over seeds: the evaluation before and "
        "after RL, the worst family's evaluation after and the best-worst spread, training success in the "
        "first and last third, and each family's evaluation after. Long: with the defaults "
        "(configs/train_swe_oneturn.yaml, 40 steps, 3 seeds) about 25 minutes on 2 cores (22 measured). "
        "A rerun with the same --out resumes.",
        "python -m bench.experiments.se_rl --seeds 3 --out runs/bench-se-rl   |   smoke: python -m bench.experiments.se_rl "
        "--config configs/train_swe_quick.yaml --steps 1 --seeds 1 --out /tmp/se-rl-smoke warm_start.steps=2 "
        "evaluation.episodes=2",
        config="configs/train_swe_oneturn.yaml",
        out=Path("runs/bench-se-rl"),
        out_help="runs and figures.json",
    )
    parser.add_argument("--steps", type=int, default=None, help="RL steps per run (default: the config's run.steps)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1, one warm start each (default 3)")
    args = parser.parse_args(argv)
    if args.seeds < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--seeds and --steps must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    setting = {"config": args.config, "overrides": args.overrides, "steps": args.steps}
    return run_experiment(
        "se_rl", args, [*QUIET, *args.overrides, *arm_settings("se_rl")],
        lambda base: keep_one_setting("bench.experiments.se_rl", args.out, setting), lambda: bench(args),
        lambda folders, base: write_results(folders, args), lambda exc: kept_runs(args.out),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
