"""SAO vs GRPO vs PPO at an equal rollout budget, from the same warm start, over seeds.

    python -m bench.learning [--json PATH] [--seeds N] [--config configs/train_swe.yaml] [key=value ...]

For each seed: one supervised warm start on the tasks' gold trajectories (the config's
`warm_start_steps`, saved as `step_000000`), then each method trains from that same policy
with the config's settings otherwise (the `make train-swe` recipe):

- `sao`: one rollout per task, the critic as baseline, SAO's double-sided token mask;
- `ppo`: one rollout per task, the critic with GAE(0.95) and PPO's clipped objectives;
- `grpo`: `group_size=2` rollouts per task and half the tasks per step (the same episodes
  per step), group-normalised advantages, no critic.

Every method plays the same number of episodes (`steps x episodes_per_step`). Figures per
method: `<method>_first_success` and `<method>_final_success` (mean training success rate
over the first and the last third of the steps, averaged over seeds), `<method>_final_std`
(spread of the final figure across seeds) and `<method>_rise` (final - first). When the
config sets `eval_episodes` (the default one does), each run also evaluates the policy on
fixed seeds before and after RL: `<method>_eval_before`, `<method>_eval_after` and
`<method>_eval_rise`, averaged over seeds, with `<method>_eval_rise_std`. The table is
what it is: with a tiny model, a few tasks and a few minutes of CPU, seeds disagree.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from bench.common import RESULTS, report

METHODS = {
    "sao": ["algorithm.name=sao"],
    "ppo": ["algorithm.name=ppo"],
    "grpo": ["algorithm.name=grpo", "algorithm.group_size=2"],
}


def _thirds(records: list[dict]) -> tuple[float, float]:
    rates = [r["success_rate"] for r in records if "success_rate" in r]
    third = max(1, len(rates) // 3)
    return statistics.fmean(rates[:third]), statistics.fmean(rates[-third:])


def method_figures(
    outcomes: dict[str, list[tuple[float, float]]], evaluations: dict[str, list[tuple[float, float]]]
) -> dict[str, float]:
    """Per method, over seeds: training success in the first and last third of RL
    (`outcomes`: one (first, last) pair per seed) and, where runs evaluated, success on the
    fixed evaluation seeds before and after RL (`evaluations`: one (before, after) pair per
    seed). Methods without evaluations get no `eval_*` figures."""
    figures: dict[str, float] = {}
    for method, pairs in outcomes.items():
        if not pairs:
            continue
        first = statistics.fmean(p[0] for p in pairs)
        final = statistics.fmean(p[1] for p in pairs)
        figures[f"{method}_first_success"] = round(first, 4)
        figures[f"{method}_final_success"] = round(final, 4)
        figures[f"{method}_final_std"] = round(statistics.pstdev([p[1] for p in pairs]), 4)
        figures[f"{method}_rise"] = round(final - first, 4)
        if evaluated := evaluations.get(method):
            before = statistics.fmean(p[0] for p in evaluated)
            after = statistics.fmean(p[1] for p in evaluated)
            figures[f"{method}_eval_before"] = round(before, 4)
            figures[f"{method}_eval_after"] = round(after, 4)
            figures[f"{method}_eval_rise"] = round(after - before, 4)
            figures[f"{method}_eval_rise_std"] = round(statistics.pstdev([p[1] - p[0] for p in evaluated]), 4)
    return figures


def main() -> None:
    from sandboxes.console import setup_logging

    setup_logging()
    parser = argparse.ArgumentParser(
        prog="python -m bench.learning",
        description="SAO against the baselines PPO (critic, GAE 0.95, clipped) and GRPO (groups of 2, "
        "no critic) at an equal rollout budget, from the same supervised warm start, over seeds: "
        "the `make train-swe` recipe once per method and seed. Measures the training success rate "
        "in the first and last third of RL, its spread across seeds and, when the config "
        "evaluates, the success on fixed seeds before and after RL. Takes about 45 minutes on 2 "
        "cores with the defaults (2 seeds: per seed a warm start and three training runs of "
        "several minutes each).",
        epilog="example: python -m bench.learning --seeds 1 run.steps=20",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "learning.json", help="where to write the figures")
    parser.add_argument("--seeds", type=int, default=2, help="seeds to run every method with (0, 1, ...)")
    parser.add_argument("--config", default="configs/train_swe.yaml", help="the training recipe every run starts from")
    parser.add_argument(
        "overrides", nargs="*", help="section.field=value settings for every run (e.g. learner.lr=1e-4)"
    )
    args = parser.parse_args()
    import ray

    from trainer.config import load_config
    from trainer.orchestrator.loop import start_ray
    from trainer.train import train

    base = load_config(args.config, args.overrides)
    if not base.warm_start.steps:
        raise SystemExit(f"{args.config}: bench.learning compares methods after a warm start; set warm_start.steps")
    per_batch = base.orchestrator.episodes_per_step
    figures: dict[str, float] = {"seeds": args.seeds, "steps": base.run.steps, "episodes_per_step": per_batch}
    outcomes: dict[str, list[tuple[float, float]]] = {m: [] for m in METHODS}
    evaluations: dict[str, list[tuple[float, float]]] = {m: [] for m in METHODS}
    started = start_ray(workers=base.orchestrator.rollout_workers + 1)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-learning-") as tmp:
            for seed in range(args.seeds):
                warm = train(load_config(args.config, [*args.overrides, f"run.output_dir={tmp}", f"run.name=warm{seed}",
                                                       f"run.seed={seed}", "run.steps=0", "evaluation.episodes=0"]))  # fmt: skip
                policy = warm / "checkpoints" / "step_000000" / "policy"
                for method, settings in METHODS.items():
                    per_step = per_batch // (2 if method == "grpo" else 1)
                    run = train(
                        load_config(
                            args.config,
                            [
                                *args.overrides,
                                f"run.output_dir={tmp}",
                                f"run.name={method}{seed}",
                                f"run.seed={seed}",
                                f"model.name={policy}",
                                "warm_start.steps=0",
                                f"orchestrator.episodes_per_step={per_step}",
                                *settings,
                            ],
                        )  # fmt: skip
                    )
                    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
                    outcomes[method].append(_thirds(records))
                    summary = run / "summary.json"
                    if summary.exists() and "eval_after" in (evaluated := json.loads(summary.read_text())):
                        evaluations[method].append(
                            (evaluated["eval_before"]["success_rate"], evaluated["eval_after"]["success_rate"])
                        )
                    print(f"seed {seed} {method}: success first third {outcomes[method][-1][0]:.3f} "
                          f"-> last third {outcomes[method][-1][1]:.3f}")  # fmt: skip
    finally:
        if started:
            ray.shutdown()
    figures.update(method_figures(outcomes, evaluations))
    report("learning", figures, args.json)


if __name__ == "__main__":
    main()
