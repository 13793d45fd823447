"""Stability, as the SAO paper claims it: long runs of SAO and GRPO from the same warm start.

    python -m bench.experiments.stability [--steps 300] [--seed 0] [--out DIR] [--methods sao,grpo]
                                          [--lr METHOD=LR,...] [key=value ...]

The SAO paper reports GRPO collapsing near step 160 while SAO trains for ~1000 steps. This
bench runs each method for `--steps` RL steps (300 by default; about 60-80 minutes for both
on 2 cores, an estimate in docs/stability-bench.md) from one supervised warm start per seed
(`bench.experiments.common.TrainingRunner.warm_start`: a `run.steps=0` run saves the
warm-started policy as `step_000000`; each method starts from it with `warm_start.steps=0`).
Methods get the settings `bench.experiments.learning` compares them with
(`common.method_settings`): SAO the config's, GRPO groups of 2 rollouts of half the tasks per
step, so both play the same episodes per step. Evaluation is off
(`evaluation.episodes=0`; an override turns it back on) and checkpoints are sparse.

Per step and method it keeps the training success rate, the sampled entropy (mean -log p of
the sampled action tokens), the policy's gradient norm, SAO's masked fractions (low and high)
and the value loss (critic methods); it names the step where a run collapsed (`find_collapse`
defines it) or says none did, and draws the curves side by side (`plot`).

Outputs: `--out` holds the runs (`runs/warm-s<seed>/`, `runs/<method>-s<seed>/`, each with
its own metrics.jsonl), `curves.json` (every method's per-step values and summary),
`stability.png` and `setting.json`; `--json` gets the table's figures. The bench resumes:
started again with the same `--out`, it keeps the warm start and the finished runs and
continues an unfinished run from its newest checkpoint (`run.resume=auto`; Ctrl-C saves one
of the last finished step). An `--out` holds one setting (config, overrides, steps, lrs).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import sys
from pathlib import Path

from bench.experiments.common import (
    METHODS,
    TrainingRunner,
    experiment_parser,
    finished,
    keep_one_setting,
    method_settings,
    moving_average,
    read_records,
    run_experiment,
    save_figure,
)

logger = logging.getLogger(__name__)

WINDOW = 20
"""Steps in the trailing window that success and entropy are averaged over."""
DROP = 0.25
"""Success collapse: the window's mean below this fraction of the best window so far."""
MIN_BEST = 0.1
"""... and only once some window reached this success rate (a run that never learned cannot
collapse)."""
ENTROPY_FLOOR = 0.005
"""Entropy collapse: the window's mean sampled entropy below this, in nats per token."""
ENTROPY_DROP = 0.1
"""... or below this fraction of the first window's (the warm start's own level)."""

QUIET = ["evaluation.episodes=0", "run.checkpoint_every=50", "run.samples_every=10"]
"""Settings for every run, before the user's overrides (which may change them)."""

CURVES = ("success_rate", "sampled_entropy", "grad_norm", "masked_low_fraction", "masked_high_fraction", "value_loss")
"""The per-step values kept for every method (None where a step has no such value)."""


def _non_finite(record: dict, skipped: int) -> str | None:
    bad = [
        key
        for key, value in record.items()
        if (key == "grad_norm" or key.endswith("_loss")) and isinstance(value, float) and not math.isfinite(value)
    ]
    if bad:
        return f"non-finite {', '.join(sorted(bad))}"
    if record.get("skipped_steps", skipped) > skipped:
        return "the learner skipped the step (a non-finite loss or gradient)"
    return None


def collapse(
    records: list[dict],
    *,
    window: int = WINDOW,
    drop: float = DROP,
    min_best: float = MIN_BEST,
    entropy_floor: float = ENTROPY_FLOOR,
    entropy_drop: float = ENTROPY_DROP,
) -> tuple[int, str] | None:
    """The first step at which the run collapsed and why, or None; the definition is
    `find_collapse`'s."""
    success: list[float] = []
    entropy: list[float] = []
    best = 0.0
    start_entropy: float | None = None
    skipped = 0
    for record in sorted((r for r in records if "step" in r), key=lambda r: r["step"]):
        step = record["step"]
        if why := _non_finite(record, skipped):
            return step, why
        skipped = record.get("skipped_steps", skipped)
        if "success_rate" in record:
            success.append(float(record["success_rate"]))
            if len(success) >= window:
                mean = statistics.fmean(success[-window:])
                best = max(best, mean)
                if best >= min_best and mean < drop * best:
                    return step, (
                        f"success over the last {window} steps {mean:.3f} < {drop:g} x the best window {best:.3f}"
                    )
        if "sampled_entropy" in record:
            entropy.append(float(record["sampled_entropy"]))
            if len(entropy) >= window:
                mean = statistics.fmean(entropy[-window:])
                start_entropy = mean if start_entropy is None else start_entropy
                if mean < entropy_floor:
                    return step, f"sampled entropy over the last {window} steps {mean:.4f} < {entropy_floor:g} nats"
                if mean < entropy_drop * start_entropy:
                    return step, (
                        f"sampled entropy over the last {window} steps {mean:.4f} < {entropy_drop:g} x "
                        f"the first window's {start_entropy:.4f}"
                    )
    return None


def find_collapse(records: list[dict], **limits) -> int | None:
    """The first RL step at which a run has collapsed, or None if it never did.

    `records` are a run's metrics.jsonl lines (any order; lines without `step` are ignored).
    A run has collapsed at step s, the first step where any of these holds:

    - **non-finite**: step s reports a non-finite `grad_norm` or `*_loss`, or the learner
      skipped it for one (`skipped_steps` rose). The update rule broke; nothing later counts.
    - **success collapse**: the mean training success rate over the trailing window of
      `window` (20) steps ending at s is below `drop` (0.25) times the best such window mean
      so far, and that best reached `min_best` (0.1). Windows are full ones only, so one lucky
      batch cannot set the best; relative to the run's own best, so a run that starts from a
      strong warm start and loses three quarters of it collapses as much as a weak one; and a
      run that never learned (best below `min_best`) has nothing to lose and never collapses.
      With 8 episodes per step a window holds 160 episodes, so a drop to a quarter is far
      outside the noise of a steady run.
    - **entropy collapse**: the mean `sampled_entropy` (mean -log p of the sampled action
      tokens) over the trailing window is below `entropy_floor` (0.005 nats per token), or
      below `entropy_drop` (0.1) times the first full window's mean. The relative test is the
      main one: after a warm start on gold trajectories the tiny model's entropy is already
      low in absolute terms (most sampled tokens are the gold ones), so a fixed floor such as
      0.05 would call the warm start itself collapsed. A policy that samples one answer every
      time no longer explores; it counts even while success holds, since RL then has no new
      signal (a group of identical rollouts has zero advantage).

    The step named is where the trailing window makes the case, which lags the onset of a
    sharp fall by up to a window (for success falling from p to 0: 0.75 x window steps).
    `collapse` returns the same step with the reason. `limits` override the keyword defaults.
    """
    found = collapse(records, **limits)
    return found[0] if found else None


def curves(records: list[dict]) -> dict[str, list]:
    """`step` and each of `CURVES` as lists aligned by step (None where a step lacks it)."""
    ordered = sorted((r for r in records if "step" in r), key=lambda r: r["step"])
    return {"step": [r["step"] for r in ordered], **{key: [r.get(key) for r in ordered] for key in CURVES}}


def run_summary(records: list[dict], window: int = WINDOW) -> dict:
    """A run's figures: steps done, the final trailing-window means of success and entropy,
    the collapse step (or "none") and its reason, the largest finite gradient norm."""
    found = collapse(records, window=window)
    rates = [r["success_rate"] for r in records if "success_rate" in r]
    entropies = [r["sampled_entropy"] for r in records if "sampled_entropy" in r]
    norms = [r["grad_norm"] for r in records if isinstance(r.get("grad_norm"), float) and math.isfinite(r["grad_norm"])]
    return {
        "steps_done": max((r["step"] for r in records if "step" in r), default=0),
        "final_success_ma": round(statistics.fmean(rates[-window:]), 4) if rates else None,
        "final_entropy_ma": round(statistics.fmean(entropies[-window:]), 5) if entropies else None,
        "collapse_step": found[0] if found else "none",
        "collapse_reason": found[1] if found else "",
        "max_grad_norm": round(max(norms), 5) if norms else None,
    }


PANELS = (
    ("success_rate", "training success ({w}-step moving average)"),
    ("sampled_entropy", "sampled entropy (nats per token)"),
    ("grad_norm", "policy gradient norm"),
    ("masked", "masked fraction (low solid, high dashed)"),
    ("value_loss", "value loss"),
)


def plot(runs: dict[str, list[dict]], path: Path, window: int = WINDOW) -> Path:
    """Draw `stability.png`: one column per metric (success moving average, entropy, gradient
    norm, masked fractions, value loss), every method's curve in each, a dotted vertical line
    at a method's collapse step. `runs`: method -> its metrics records."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.6), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (method, records) in enumerate(runs.items()):
        colour = colours[index % len(colours)]
        data = curves(records)
        found = find_collapse(records, window=window)
        for ax, (key, _) in zip(axes[0], PANELS, strict=True):
            if key == "masked":
                for name, style in (("masked_low_fraction", "-"), ("masked_high_fraction", "--")):
                    _line(ax, data["step"], data[name], colour, style, method if style == "-" else None)
            elif key == "success_rate":
                points = [(s, v) for s, v in zip(data["step"], data[key], strict=True) if v is not None]
                smooth = moving_average([v for _, v in points], window)
                ax.plot([s for s, _ in points], smooth, color=colour, label=method)
            else:
                _line(ax, data["step"], data[key], colour, "-", method)
            if found is not None:
                ax.axvline(found, color=colour, linestyle=":", linewidth=1.5)
    for ax, (_, title) in zip(axes[0], PANELS, strict=True):
        ax.set_title(title.format(w=window), fontsize=10)
        ax.set_xlabel("RL step")
    fig.suptitle("stability: collapse steps dotted", fontsize=11)
    return save_figure(fig, axes[0], path)


def _line(ax, steps: list[int], values: list, colour: str, style: str, label: str | None) -> None:
    points = [(s, v) for s, v in zip(steps, values, strict=True) if isinstance(v, int | float)]
    if points:
        ax.plot([s for s, _ in points], [v for _, v in points], color=colour, linestyle=style, label=label)


# -- running ----------------------------------------------------------------------------------


def run_dir(args: argparse.Namespace, method: str) -> Path:
    return args.out / "runs" / f"{method}-s{args.seed}"


def bench(args: argparse.Namespace) -> dict[str, list[dict]]:
    """The seed's warm start (`TrainingRunner.warm_start`: trained once, kept while its
    checkpoint is complete), then each method's run from it (`TrainingRunner.arm`: kept when
    finished, resumed from its newest checkpoint when not); returns method -> metrics records."""
    runner = TrainingRunner(args.config, [*QUIET, *args.overrides], args.out, args.steps)
    policy = runner.timed_warm_start(args.seed)
    runs: dict[str, list[dict]] = {}
    for method in args.methods:
        lr = [f"learner.lr={args.lr[method]}"] if method in args.lr else []
        settings = [*lr, *method_settings(method, runner.base.orchestrator.episodes_per_step)]
        runs[method] = read_records(runner.arm(method, args.seed, args.steps, settings, policy))
        figures = run_summary(runs[method], args.window)
        logger.info("%s: final success (%d-step mean) %s, collapse: %s %s", method, args.window,
                    figures["final_success_ma"], figures["collapse_step"], figures["collapse_reason"])  # fmt: skip
    return runs


def write_results(runs: dict[str, list[dict]], args: argparse.Namespace, episodes: int) -> dict:
    """`curves.json` and `stability.png` in `--out`; returns the table's figures."""
    summaries = {method: run_summary(records, args.window) for method, records in runs.items()}
    data = {
        "steps": args.steps,
        "seed": args.seed,
        "window": args.window,
        "methods": {m: {"summary": summaries[m], "curves": curves(r)} for m, r in runs.items()},
    }
    (args.out / "curves.json").write_text(json.dumps(data, indent=1) + "\n")
    chart = plot(runs, args.out / "stability.png", args.window)
    figures: dict = {"steps": args.steps, "episodes_per_step": episodes, "seed": args.seed}
    for method, summary in summaries.items():
        for key in ("steps_done", "final_success_ma", "final_entropy_ma", "collapse_step", "max_grad_norm"):
            figures[f"{method}_{key}"] = summary[key]
    logger.info("curves: %s  plot: %s", args.out / "curves.json", chart)
    return figures


def kept(args: argparse.Namespace, in_progress: str) -> str:
    """The line an interrupted bench ends with: what is kept in `--out` and how to go on
    (`in_progress`: what the interrupted training run kept, as `trainer.train` says it)."""
    if not finished(args.out / "runs" / f"warm-s{args.seed}", 0):
        return "the warm start did not finish (it starts over); run the same command again to continue"
    done = [m for m in args.methods if finished(run_dir(args, m), args.steps)]
    line = f"warm start and finished runs ({', '.join(done) or 'none'}) kept in {args.out}"
    if in_progress:  # the trainer's own advice names run.resume, which the bench sets itself
        line += f"; the run in progress: {in_progress.split('; run the same command')[0]}"
    return line + "; run the same command again to continue"


def _lrs(text: str) -> dict[str, float]:
    pairs = [item.split("=", 1) for item in text.split(",") if item.strip()]
    if any(len(pair) != 2 for pair in pairs):
        raise argparse.ArgumentTypeError(f"{text!r}: expected METHOD=LR[,METHOD=LR...], e.g. grpo=2.5e-4")
    return {method.strip(): float(lr) for method, lr in pairs}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = experiment_parser(
        "stability",
        "Long runs of SAO and GRPO (groups of 2, the same episodes per step) from the same "
        "supervised warm start: per step the training success, sampled entropy, gradient norm, masked "
        "fractions and value loss; the step where each run collapsed (see the module docstring) or none; "
        "a plot of the curves side by side. Resumes: run it again with the same --out to continue. "
        "About 1-1.5 hours on 2 cores with the defaults, an estimate (docs/stability-bench.md).",
        "python -m bench.experiments.stability --steps 300 --out runs/bench-stability --lr grpo=2.5e-4",
        config="configs/train_swe.yaml",
        out=Path("runs/bench-stability"),
        out_help="runs, curves.json and plot",
    )
    parser.add_argument("--steps", type=int, default=300, help="RL steps per method (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the warm start and of every run")
    parser.add_argument("--methods", default="sao,grpo", help=f"comma-separated, of {', '.join(METHODS)}")
    parser.add_argument("--lr", type=_lrs, default={}, help="learner.lr per method, e.g. sao=5e-4,grpo=2.5e-4 "
                        "(bench.experiments.learning's chosen lrs; default: the config's for all)")  # fmt: skip
    parser.add_argument("--window", type=int, default=WINDOW, help="steps in the collapse test's trailing window")
    args = parser.parse_args(argv)
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if unknown := [m for m in [*args.methods, *args.lr] if m not in METHODS]:
        parser.error(f"unknown methods {', '.join(unknown)} (known: {', '.join(METHODS)})")
    if args.steps < 1 or args.window < 1:
        parser.error("--steps and --window must be at least 1")
    return args


def check_setting(args: argparse.Namespace) -> None:
    """`--out` holds runs of one setting (config, overrides, steps, lrs): refuse another."""
    setting = {"config": args.config, "overrides": args.overrides, "steps": args.steps, "lr": args.lr}
    keep_one_setting("bench.experiments.stability", args.out, setting)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run_experiment(
        "stability", args, [*QUIET, *args.overrides], lambda base: check_setting(args), lambda: bench(args),
        lambda runs, base: write_results(runs, args, base.orchestrator.episodes_per_step),
        lambda exc: kept(args, getattr(exc, "kept", "")),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
