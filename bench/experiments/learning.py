"""SAO against PPO, GRPO, GRPO with SAO's mask, Dr.GRPO and DAPO: a fair comparison (issue #16),
with a control arm, GRPO on its positive advantages only (`grpo_pos`, issue #39).

    python -m bench.experiments.learning [--out DIR] [--json PATH] [--methods sao,grpo]
                                         [--lrs 1.25e-4,2.5e-4,5e-4] [--seeds N] [--steps N] [--group-size G]
                                         [--config configs/train_swe.yaml] [key=value ...]

Every method gets the same treatment on the `make train-swe` recipe (the config's settings
otherwise, so the multi-turn default when the config is):

1. the same learning-rate sweep (`LRS`, written here once), each lr trained on the sweep
   seed 0; its best lr is the one with the highest training success over the last third of
   the RL steps (ties: the smaller lr);
2. that lr on seeds 0..N-1 (the sweep's seed-0 run is reused, not rerun).

Each run starts from the same supervised warm start of its seed (one warm start per seed,
`warm_start.steps` of the config, shared by every method and lr). Equal rollout budget: every
method plays `orchestrator.episodes_per_step` episodes per step for `run.steps` steps. The
config's `episodes_per_step` counts groups, so the group methods (`GROUPED`) play groups of
`--group-size` rollouts (`GROUP_SIZE`, 2, by default) of that many times fewer tasks per step;
SAO and PPO play one rollout per task.
Each method uses its own paper's loss aggregation (`algorithm.loss_aggregation=null`). The
methods and their settings (`METHODS`, `GROUPED`, `GROUP_SIZE`, `method_settings`) live in
`bench.experiments.common`, where the other experiments take them from.

Every finished run's figures are appended to `DIR/results.jsonl` as soon as it finishes; a
rerun with the same `--out` skips the runs recorded there (Ctrl-C or a crash loses no
finished run; an unfinished one is started again). Per-run outputs (metrics.jsonl,
summary.json, checkpoints) stay in `DIR/runs/`. Per method the report gives the chosen lr,
the sweep (lr -> training success), the evaluation rise (summary.json's `eval_after -
eval_before`) as mean and population std over seeds, training success in the first and last
third, for the mask methods the mean fraction of tokens the mask dropped, the steps the learner
skipped for want of a signal, for the critic methods the critic's value mean, spread and
explained variance over the last third, and where the
method fails (`diagnose` on the metrics, and declines of training success or the evaluation:
`failures`). With a tiny model, a few tasks and CPU minutes, seeds disagree:
the spread is part of the result.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from itertools import dropwhile
from pathlib import Path

from bench.common import RESULTS
from bench.experiments.common import (
    GROUP_SIZE,
    METHODS,
    TrainingRunner,
    experiment_parser,
    method_settings,
    read_records,
    read_summary,
    thirds,
)

MASKED = ("masked_low_fraction", "masked_high_fraction")
CRITIC = ("value_mean", "value_std", "explained_variance")
"""The critic's statistics per step (`trainer.learner.objectives.critic.value_statistics`),
averaged over the last third of a run's steps."""

# Half, once and twice the recipe's learner.lr (2.5e-4 on the multi-turn default, where 5e-4
# rose no faster and noisier; the one-turn recipe's 5e-4 is the top of the sweep): a factor of
# 2 either way brackets where the tuning saw runs crawl or collapse, and
# gives methods whose loss scales differently (Dr.GRPO's sums, GRPO's normalised advantages)
# an lr of their own without favouring the one the recipe was tuned with.
LRS: tuple[float, ...] = (1.25e-4, 2.5e-4, 5e-4)
SWEEP_SEED = 0

COLLAPSE_STEPS = 5
"""`diagnose`: this many final steps at training success 0 is a collapse."""
ENTROPY_RATIO = 0.2
"""`diagnose`: sampled entropy in the last third below this share of the first third's."""
NO_SIGNAL_SHARE = 0.5
"""`diagnose`: at least this share of episodes in all-equal groups (DAPO's filter) is no signal."""
DECLINE = 0.1
"""`failures`: training success (last third against first) or the evaluation (after against
before) falling by at least this much is a decline, short of a collapse."""


Runner = Callable[[str, float, int], dict]
"""`runner(method, lr, seed)`: train one run, return its `run_figures` (plus anything to record)."""


def _steps(records: Iterable[dict]) -> list[dict]:
    return [r for r in records if "step" in r]


def diagnose(records: list[dict]) -> str:
    """Where a run failed, from its metrics.jsonl records, as one short line ("—" if nowhere):
    training success 0 for the last `COLLAPSE_STEPS` steps or more, the sampled entropy
    collapsing (`ENTROPY_RATIO`), most episodes in all-equal groups (`zero_variance_dropped`,
    DAPO's filter; `NO_SIGNAL_SHARE`), non-finite steps the learner skipped."""
    steps = _steps(records)
    found = []
    success = [r["success_rate"] for r in steps if "success_rate" in r]
    zeros = len(success) - len(list(dropwhile(lambda s: s == 0, reversed(success))))
    if zeros >= COLLAPSE_STEPS:
        found.append(f"collapsed: training success 0 for the last {zeros} steps")
    entropy = [r["sampled_entropy"] for r in steps if "sampled_entropy" in r]
    if len(entropy) >= 3:
        first, last = thirds(entropy)
        if first > 0 and last < ENTROPY_RATIO * first:
            found.append(f"entropy collapse: {first:.3g} -> {last:.3g} nats/token")
    dropped = [r["zero_variance_dropped"] for r in steps if "zero_variance_dropped" in r]
    played = sum(r.get("episodes", 0) for r in steps if "zero_variance_dropped" in r)
    if dropped and played and sum(dropped) / played >= NO_SIGNAL_SHARE:
        found.append(f"no learning signal: {sum(dropped) / played:.0%} of episodes in all-equal groups")
    skipped = max((r.get("skipped_steps", 0) for r in steps), default=0)
    if skipped:
        found.append(f"non-finite steps skipped: {skipped}")
    return "; ".join(found) or "—"


def run_figures(records: list[dict], summary: dict) -> dict:
    """One run's figures from its metrics.jsonl records and summary.json: training success in
    the first and last third of the steps, the evaluation before and after RL (None without
    one), the mean share of policy tokens the mask dropped per step (None for a loss without
    a mask), how many steps the learner skipped for want of a signal (None in records from
    before it counted them), the critic's statistics over the last third (`CRITIC`, None
    without a critic) and `diagnose`'s line."""
    steps = _steps(records)
    success = [r["success_rate"] for r in steps if "success_rate" in r]
    first, final = thirds(success) if success else (0.0, 0.0)
    masked = [sum(r[k] for k in MASKED) for r in steps if all(k in r for k in MASKED)]
    evaluated = "eval_before" in summary and "eval_after" in summary
    no_signal = [r["skipped_no_signal"] for r in steps if "skipped_no_signal" in r]
    critic = {}
    for key in CRITIC:
        values = [r[key] for r in steps if key in r]
        critic[key] = round(thirds(values)[1], 4) if values else None
    return {
        "steps": len(steps),
        "first_success": round(first, 4),
        "final_success": round(final, 4),
        "eval_before": summary["eval_before"]["success_rate"] if evaluated else None,
        "eval_after": summary["eval_after"]["success_rate"] if evaluated else None,
        "masked_fraction": round(statistics.fmean(masked), 6) if masked else None,
        "no_signal_steps": max(no_signal) if no_signal else None,
        **critic,
        "fails": diagnose(records),
    }


def failures(run: dict) -> str:
    """Where a recorded run failed: `diagnose`'s line from its metrics, plus the declines its
    figures show (`DECLINE`): training success or the evaluation falling. "—" if nowhere."""
    found = [] if run["fails"] == "—" else [run["fails"]]
    if run["first_success"] - run["final_success"] >= DECLINE:
        found.append(f"training success fell {run['first_success']:.2f} -> {run['final_success']:.2f}")
    if run.get("eval_before") is not None and run["eval_before"] - run["eval_after"] >= DECLINE:
        found.append(f"evaluation fell {run['eval_before']:.2f} -> {run['eval_after']:.2f}")
    return "; ".join(found) or "—"


def best_lr(sweep: dict[float, float]) -> float:
    """The lr with the highest training success; of equals, the smaller lr."""
    return max(sweep, key=lambda lr: (sweep[lr], -lr))


def method_figures(method: str, sweep: dict[float, float], runs: list[dict]) -> dict:
    """One method's row: its chosen lr, the sweep, and over `runs` (the chosen lr's runs, one
    per seed) the means (and for the evaluation rise the population std) of the figures."""
    rises = [r["eval_after"] - r["eval_before"] for r in runs if r.get("eval_before") is not None]
    masked = [r["masked_fraction"] for r in runs if r.get("masked_fraction") is not None]
    fails = [f"s{r['seed']}: {failures(r)}" for r in runs if failures(r) != "—"]

    def mean(key: str, digits: int = 4) -> float | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return round(statistics.fmean(values), digits) if values else None

    return {
        "method": method,
        "lr": best_lr(sweep),
        "sweep": {str(lr): success for lr, success in sorted(sweep.items())},
        "seeds": [r["seed"] for r in runs],
        "eval_rise_mean": round(statistics.fmean(rises), 4) if rises else None,
        "eval_rise_std": round(statistics.pstdev(rises), 4) if rises else None,
        "first_success": round(statistics.fmean(r["first_success"] for r in runs), 4),
        "final_success": round(statistics.fmean(r["final_success"] for r in runs), 4),
        "masked_fraction": round(statistics.fmean(masked), 6) if masked else None,
        "no_signal_steps": mean("no_signal_steps", 1),
        **{key: mean(key) for key in CRITIC},
        "fails": "; ".join(fails) or "—",
    }


def load_results(path: Path) -> dict[tuple[str, float, int], dict]:
    """The runs recorded in a results file, by (method, lr, seed); a torn last line (a crash
    mid-write) is ignored."""
    done = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[(record["method"], float(record["lr"]), int(record["seed"]))] = record
    return done


def append_result(path: Path, record: dict) -> None:
    """One JSON line at the end of `path`, after a newline if a crash left a torn line."""
    torn = path.is_file() and path.stat().st_size and not path.read_bytes().endswith(b"\n")
    with path.open("a") as out:
        out.write(("\n" if torn else "") + json.dumps(record) + "\n")


def run_bench(methods: list[str], lrs: Iterable[float], seeds: int, runner: Runner, results: Path) -> list[dict]:
    """The sweep on `SWEEP_SEED` for every method, then each method's best lr on seeds
    0..`seeds`-1; runs recorded in `results` are not run again, new ones are appended as
    they finish. Returns one `method_figures` row per method."""
    done = load_results(results)
    results.parent.mkdir(parents=True, exist_ok=True)

    def get(method: str, lr: float, seed: int) -> dict:
        key = (method, float(lr), seed)
        if key not in done:
            record = {"method": method, "lr": float(lr), "seed": seed, **runner(method, lr, seed)}
            append_result(results, record)
            done[key] = record
            print(f"{method} lr={lr:g} seed {seed}: training success {record['first_success']:.3f} -> "
                  f"{record['final_success']:.3f}, fails: {record['fails']}")  # fmt: skip
        return done[key]

    sweeps = {m: {float(lr): get(m, lr, SWEEP_SEED)["final_success"] for lr in lrs} for m in methods}
    rows = []
    for method in methods:
        chosen = best_lr(sweeps[method])
        rows.append(method_figures(method, sweeps[method], [get(method, chosen, s) for s in range(seeds)]))
    return rows


def markdown(rows: list[dict]) -> str:
    """The report: one line per method."""

    def number(value, fmt: str) -> str:
        return "—" if value is None else format(value, fmt)

    lines = [
        "| method | lr | sweep (lr: training success) | eval rise (mean ± std) | training success first → last third "
        "| mask dropped | no-signal steps | critic V mean / std / EV | fails |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sweep = ", ".join(f"{float(lr):g}: {s:.2f}" for lr, s in r["sweep"].items())
        rise = "—" if r["eval_rise_mean"] is None else f"{r['eval_rise_mean']:+.3f} ± {r['eval_rise_std']:.3f}"
        masked = "—" if r["masked_fraction"] is None else f"{r['masked_fraction']:.2%}"
        no_signal = number(r.get("no_signal_steps"), "g")
        critic = " / ".join(number(r.get(key), ".3f") for key in CRITIC)
        critic = "—" if r.get("value_mean") is None else critic
        lines.append(f"| {r['method']} | {number(r['lr'], 'g')} | {sweep} | {rise} "
                     f"| {r['first_success']:.2f} → {r['final_success']:.2f} | {masked} | {no_signal} | {critic} "
                     f"| {r['fails']} |")  # fmt: skip
    return "\n".join(lines)


def plan_runs(methods: list[str], lrs: Iterable[float], seeds: int, done: dict) -> list[tuple[str, float, int]]:
    """The runs `run_bench` still has to make, in its order, given the recorded ones: the
    sweep's missing runs, then for each method whose sweep is complete its best lr's missing
    seeds (a method still sweeping has its seeds to come, not yet known)."""
    todo = [(m, float(lr), SWEEP_SEED) for m in methods for lr in lrs if (m, float(lr), SWEEP_SEED) not in done]
    for method in methods:
        sweep = {float(lr): done.get((method, float(lr), SWEEP_SEED)) for lr in lrs}
        if all(sweep.values()):
            chosen = best_lr({lr: record["final_success"] for lr, record in sweep.items()})
            todo += [(method, chosen, s) for s in range(seeds) if (method, chosen, s) not in done]
    return todo


def status(methods: list[str], lrs: Iterable[float], seeds: int, done: dict) -> str:
    """The recorded runs as a markdown table (one line per run, in the bench's order) and a
    line on what is left: how far a long benchmark has come, without training anything."""
    lines = [
        "| method | lr | seed | training success first → last third | eval before → after | mask dropped | fails |",
        "|---|---|---|---|---|---|---|",
    ]
    for (method, lr, seed), r in sorted(done.items(), key=lambda item: (methods.index(item[0][0])
                                        if item[0][0] in methods else len(methods), item[0][2], item[0][1])):  # fmt: skip
        evaluation = "—" if r.get("eval_before") is None else f"{r['eval_before']:.2f} → {r['eval_after']:.2f}"
        masked = "—" if r.get("masked_fraction") is None else f"{r['masked_fraction']:.2%}"
        lines.append(f"| {method} | {lr:g} | {seed} | {r['first_success']:.2f} → {r['final_success']:.2f} "
                     f"| {evaluation} | {masked} | {failures(r)} |")  # fmt: skip
    todo = plan_runs(methods, list(lrs), seeds, done)
    undecided = [m for m in methods if any((m, float(lr), SWEEP_SEED) not in done for lr in lrs)]
    left = f"{len(todo)} runs known to be left"
    if undecided:
        left += f", plus {seeds - 1} seeds each for {', '.join(undecided)} once their sweeps choose an lr"
    return "\n".join(lines) + f"\n\n{len(done)} runs recorded; {left}."


class SweepRunner(TrainingRunner):
    """The bench's `Runner`: each run in `out/runs/<method>-lr<lr>-s<seed>`, started afresh from
    the seed's warm start (`TrainingRunner.warm_start`)."""

    def __call__(self, method: str, lr: float, seed: int) -> dict:
        policy = self.warm_start(seed)
        run = self._train(
            f"{method}-lr{lr:g}-s{seed}",
            [f"run.seed={seed}", *self.steps, f"model.name={policy}", "warm_start.steps=0", f"learner.lr={lr}",
             *method_settings(method, self.base.orchestrator.episodes_per_step, self.group_size)],
        )  # fmt: skip
        return {**run_figures(read_records(run), read_summary(run)), "run": str(run)}


def check_setting(out: Path, setting: dict) -> None:
    """Refuse an `out` whose runs were made with another setting (`setting.json`: the config,
    the overrides, `--steps`, `--group-size`); a file from before `--group-size` existed
    was made with `GROUP_SIZE`."""
    recorded = out / "setting.json"
    if recorded.is_file():
        before = json.loads(recorded.read_text())
        before.setdefault("group_size", GROUP_SIZE)
        if before != setting:
            raise SystemExit(f"{out}: holds runs made with {json.dumps(before)}; use another --out")


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(",") if v.strip())


def main() -> None:
    from sandboxes.console import setup_logging

    setup_logging()
    parser = experiment_parser(
        "learning",
        "SAO, PPO (critic, GAE 0.95, clipped), GRPO, GRPO with SAO's double-sided mask, "
        "Dr.GRPO, DAPO and a positive-only GRPO control on the `make train-swe` recipe, fairly: the same learning-rate sweep for "
        f"every method (lrs {', '.join(f'{lr:g}' for lr in LRS)} on seed 0, best by training success "
        "over the last third of RL), then the best lr on N seeds, each from the same supervised warm "
        "start per seed at an equal rollout budget (episodes per step). Reports per method the chosen "
        "lr, the evaluation rise (mean and std over seeds), the share of tokens SAO's mask drops, the "
        "steps skipped for no signal, the critic's statistics and where runs fail. Long: with the "
        "defaults 7 x (3 + 2) = 35 training runs of 4-13 minutes and 3 warm starts, about 5 hours on "
        "2 cores. A rerun with the same --out resumes "
        "after the last finished run.",
        "python -m bench.experiments.learning --methods sao,grpo_mask --lrs 5e-4 --seeds 1 --steps 3 "
        "--out /tmp/learning-smoke evaluation.episodes=8",
        config="configs/train_swe.yaml",
        out=RESULTS / "learning",
        out_help="runs and results.jsonl (resumable)",
    )
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {', '.join(METHODS)}")
    parser.add_argument("--lrs", type=_floats, default=LRS, help="comma-separated learning rates to sweep")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 to run each method's best lr on")
    parser.add_argument("--steps", type=int, default=None, help="RL steps per run (default: the config's run.steps)")
    parser.add_argument(
        "--group-size", type=int, default=GROUP_SIZE,
        help=f"rollouts per task of the group methods at the same episodes per step (default {GROUP_SIZE})",
    )  # fmt: skip
    parser.add_argument(
        "--status", action="store_true", help="print the runs recorded in --out and what is left; train nothing"
    )
    args = parser.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if unknown := [m for m in methods if m not in METHODS]:
        parser.error(f"unknown methods {unknown}; known: {', '.join(METHODS)}")
    if not args.lrs or args.seeds < 1:
        parser.error("need at least one lr and one seed")
    if args.status:
        print(status(methods, args.lrs, args.seeds, load_results(args.out / "results.jsonl")))
        return
    setting = {"config": args.config, "overrides": args.overrides, "steps": args.steps, "group_size": args.group_size}
    check_setting(args.out, setting)
    runner = SweepRunner(args.config, args.overrides, args.out, args.steps, args.group_size)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "setting.json").write_text(json.dumps(setting) + "\n")

    import ray

    from trainer.orchestrator.loop import start_ray

    started = start_ray(workers=runner.base.orchestrator.rollout_workers + 1)
    try:
        rows = run_bench(methods, args.lrs, args.seeds, runner, args.out / "results.jsonl")
    finally:
        if started:
            ray.shutdown()
    table = markdown(rows)
    print(table)
    figures = {**setting, "lrs": list(args.lrs), "seeds": args.seeds, "steps": runner.base.run.steps,
               "episodes_per_step": runner.base.orchestrator.episodes_per_step, "methods": rows, "table": table}  # fmt: skip
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"written: {args.json}")


if __name__ == "__main__":
    main()
