"""BiDiRL's three ways to share devices between rollout and training, simulated and real
(issue #21).

    python -m bench.perf.multiplex [--time-model FILE.json --units N] [--episodes-per-step B]
                                   [--episodes-per-unit E] [--max-staleness S]
                                   [--steps-per-phase N] [--seed S] [--json PATH]
                                   [--real [--real-steps N] [--slow-steps N] [--workdir DIR]]
                                   [--real-runs DIR]

The simulated half of the benchmark: `trainer.orchestrator.multiplex.simulate` runs the
asynchronous pipeline under each policy, one after the other, on the same episodes (one
random stream per phase):

- **static**: the planner's split (`plan`) for the whole run;
- **colocated**: every unit time-shares (verl-style: generate a whole batch on all units,
  switch all to the learner, train, switch back), synchronous;
- **bidirectional**: the planner's split, then BiDiRL's rule (`decide`) lends idle units of
  the waiting stage to the bottleneck and returns them when the imbalance reverses.

Without `--time-model`: **the published shape at 32 units**. BiDiRL (arXiv 2607.09207)
reports heavy-tailed agentic episodes on 32 GPUs but not its per-stage numbers; the model
here is chosen to match that shape (see `published_model`): lognormal episode lengths
(median 4000 tokens, clipped at a 32k context, 1000 tokens a turn), 16 episodes per unit at
60 tokens/s each alone (concurrency exponent 0.85), 3 s of sandbox per turn, 0.4 ms per
token per learner unit plus 15 s a step (95% data-parallel efficiency per doubling), 5 s per
switch, 512 episodes a step, staleness bound 2. Two schedules:

- `drift`: the tail grows and shrinks (median 3000 / sigma 0.6, then 6000 / 1.2, then back);
- `forced`: the issue's forced imbalance: balanced, then slow episodes (sandboxes 10x
  slower), then a slow learner (3x).

With `--time-model FILE.json` (a `TimeModel.to_dict()`, e.g. fitted from this machine's
profile): that model at `--units` for one phase, plus the forced schedule; this is the
configuration the real run is compared with (`simulate_configuration`).

Figures (one flat JSON object): per schedule and policy, learner steps/s and trajectories/s
over the steps after warm-up, the ratio to static measured in the same run, the idle
fraction of each pool, switches per direction, stale drops; per phase, steps/s. Everything
above is simulated.

The real half (`--real`, about 15 minutes on 2 cores): the three policies trained for real
on this machine (`orchestrator.multiplex`, the tiny model, local sandboxes, 4 units: the
end-to-end test's configuration, `REAL`) on a two-phase workload (`write_phase_suite`: slow
episodes, then a slow learner), measured (`measured`: trajectories/s, steps/s per phase,
idle fractions, switches and their seconds per direction); then the time model fitted from
the static run (`model_from_run`, with the switch times and learner sizes only the
multiplexed runs measure) simulates the same configuration (`simulate_configuration`), and
the table shows real and simulated side by side with the simulator's error (`real_*` keys
in the JSON). `--real-runs DIR` compares runs kept earlier with `--workdir DIR`.

Over 450 lines on purpose: one benchmark whose two halves report into one table: the
simulated configurations and the real runs they are checked against, with the time model
fitted from one and fed to the other.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import RESULTS, write_calc_task
from trainer.orchestrator.multiplex import (
    POLICIES,
    EmpiricalLengths,
    LogNormalLengths,
    Phase,
    Rule,
    SimConfig,
    SimResult,
    TimeModel,
    TimeModelError,
    fit,
    plan,
    predict,
    simulate,
)

PROG = "python -m bench.perf.multiplex"
UNITS = 32
EPISODES_PER_STEP = 512
EPISODES_PER_UNIT = 16
MAX_STALENESS = 2
STEPS_PER_PHASE = 15
WARMUP_STEPS = 2
WINDOW_STEPS = 4
"""The signal window, in predicted learner steps of the first phase."""


def lengths(median: float, sigma: float) -> LogNormalLengths:
    return LogNormalLengths(median_tokens=median, sigma=sigma, tokens_per_turn=1000, max_tokens=32768)


def published_model() -> TimeModel:
    """The chosen stand-in for BiDiRL's 32-GPU agentic setting (module docstring)."""
    return TimeModel(
        generation_tokens_per_s=60.0,
        concurrency_exponent=0.85,
        tool_seconds_per_turn=3.0,
        learner_seconds_per_token=4e-4,
        learner_step_overhead_s=15.0,
        dp_efficiency=0.95,
        switch_to_learner_s=5.0,
        switch_to_rollout_s=5.0,
        episodes=lengths(4000, 1.0),
    )


def published_schedules(steps: int) -> dict[str, list[Phase]]:
    return {
        "drift": [
            Phase(steps, lengths(3000, 0.6), name="short"),
            Phase(steps, lengths(6000, 1.2), name="long tail"),
            Phase(steps, lengths(3000, 0.6), name="short again"),
        ],
        "forced": [
            Phase(steps, lengths(4000, 0.8), name="balanced"),
            Phase(steps, lengths(4000, 0.8), tool_slowdown=10.0, name="slow episodes"),
            Phase(steps, lengths(4000, 0.8), learner_slowdown=3.0, name="slow learner"),
        ],
    }


def forced_schedule(steps: int) -> list[Phase]:
    """The forced imbalance on the model's own lengths (a measured model)."""
    return [
        Phase(steps, name="balanced"),
        Phase(steps, tool_slowdown=10.0, name="slow episodes"),
        Phase(steps, learner_slowdown=3.0, name="slow learner"),
    ]


# -- the real half's workload ----------------------------------------------------------------
PADDING = (
    "Background for the reviewer: this repository is a small calculator library used by the "
    "billing service; every function is pure and has a unit test; keep the public names. "
)


def write_phase_suite(folder: Path, *, slow_seconds: float = 3.0, tasks: int = 4, padding: int = 40,
                      slow_steps: int = 6, fast_steps: int = 100) -> Path:  # fmt: skip
    """A two-phase task stream that forces each stage in turn to be the bottleneck; returns
    its YAML (`tasks.source=stream:PATH`).

    - `slow episodes` (`slow_steps` learner steps): `tasks` tasks whose hidden test sleeps
      `slow_seconds` (the learner waits on rollouts);
    - `slow learner` (then on): `tasks` tasks whose tests do not sleep and whose problem
      statement carries `padding` paragraphs of background: each episode is fast but long in
      tokens, so the learner's step (its cost grows with tokens) lags and rollouts wait on
      admission.
    Every task is the same one-line bug (`calc.add` subtracts)."""

    def task(name: str, sleep: float, statement: str) -> None:
        write_calc_task(folder, name, family=name.rsplit("-", 1)[0], sleep_seconds=sleep, statement=statement)

    problem = "add(2, 3) returns -1 instead of 5; fix calc.add."
    slow = [f"slow-{i:02d}" for i in range(tasks)]
    fast = [f"long-{i:02d}" for i in range(tasks)]
    for name in slow:
        task(name, slow_seconds, problem)
    for name in fast:
        task(name, 0.0, problem + "\n\n" + PADDING * padding)
    stream = folder / "stream.yaml"
    stream.write_text(
        json.dumps(
            {
                "source": str(folder),
                "phases": [
                    {"name": "slow episodes", "steps": slow_steps, "tasks": slow},
                    {"name": "slow learner", "steps": fast_steps, "tasks": fast},
                ],
            },
            indent=1,
        )
    )
    return stream


def simulate_configuration(
    model: TimeModel,
    units: int,
    *,
    episodes_per_step: int,
    episodes_per_unit: int,
    max_staleness: int = 1,
    steps: int = 30,
    warmup_steps: int = WARMUP_STEPS,
    rollout_units: int | None = None,
    phases: list[Phase] | None = None,
    rule: Rule | None = None,
    window_s: float | None = None,
    seed: int = 0,
    policies: tuple[str, ...] = tuple(POLICIES),
    progress: str | None = None,
) -> dict[str, SimResult]:
    """Each policy on one configuration: what a real run of `units` devices with these
    settings should see if `model` describes it (the validation against real runs calls
    this with the measured model and the run's settings). `rollout_units`: the initial split
    (None: the planner's); `window_s`: the signal window (None: `WINDOW_STEPS` predicted
    steps); `progress`: a label for one line per policy on stderr."""
    rule = rule or Rule(min_window_steps=WINDOW_STEPS)
    first = phases[0].lengths if phases else None
    split = plan(
        model, units, episodes_per_step,
        episodes_per_unit=episodes_per_unit, max_staleness=max_staleness, lengths=first,
    )  # fmt: skip
    if window_s is None:
        window_s = WINDOW_STEPS * episodes_per_step / split.predicted.throughput
    config = SimConfig(
        units=units,
        episodes_per_step=episodes_per_step,
        episodes_per_unit=episodes_per_unit,
        max_staleness=max_staleness,
        steps=steps,
        warmup_steps=warmup_steps,
        rollout_units=rollout_units if rollout_units is not None else split.rollout_units,
        window_s=window_s,
        seed=seed,
    )
    results = {}
    for policy in policies:
        started = time.process_time()
        results[policy] = simulate(model, config, policy, phases=phases, rule=rule)
        if progress:
            print(f"{progress}: {policy} simulated in {time.process_time() - started:.1f} s", file=sys.stderr)
    return results


# -- the real half -----------------------------------------------------------------------------
REAL = {
    "orchestrator.rollout_workers": 2,
    "placement.learner_ranks": 2,
    "orchestrator.episodes_per_worker": 2,
    "orchestrator.episodes_per_step": 4,
    "orchestrator.max_staleness": 1,
    "orchestrator.multiplex_profile_steps": 0,
    "orchestrator.multiplex_window_steps": 2,
    "orchestrator.multiplex_window_s": 1.0,
    "rollout.max_turns": 1,
    "rollout.max_new_tokens": 4,
    "rollout.max_total_tokens": 4096,
    # Every episode pays its sleeping tests: a kept verdict (the tiny model's diff repeats)
    # would grade it in no time, and the slow-episodes phase would not be slow.
    "rollout.grading_memo": False,
    "learner.lr": 1e-5,
    "run.samples_every": 0,
}
"""The tiny configuration every real run uses (the e2e test's): 4 units, 2 + 2 at the start
(no planner: the simulator starts the same split), a signal window of 2 steps, no grading
memo."""
REAL_SLOW_STEPS = 8
RESTORE = "the run is over"
"""The reason of the switches that take units home after the last step (not counted)."""
REAL_STEPS = 20


def real_run(policy: str, stream: Path, output: Path, steps: int) -> Path:
    """One training run of the phase workload under `policy`; its run folder."""
    from trainer.resolve import load_config
    from trainer.train import train

    overrides = [f"{key}={value}" for key, value in REAL.items()]
    overrides += [f"tasks.source=stream:{stream}", f"run.output_dir={output}", f"run.name={policy}",
                  f"run.steps={steps}", f"orchestrator.multiplex={policy}"]  # fmt: skip
    return train(load_config(None, overrides))


def measured(run_dir: Path, warmup: int = WARMUP_STEPS, *, colocated: bool = False) -> dict[str, float]:
    """Real figures of a run folder over the steps after `warmup` (as the simulator's):
    trajectories/s and learner steps/s; the learner's idle fraction (wall time not in a
    step: for colocated, whose learner exists only while it steps in the simulator, this
    counts the time its units generate); the rollout pool's (slot-seconds not holding a
    consumed episode, over the episode slots of the units serving rollout); switches and
    their mean seconds per direction (`multiplex.json`); steps/s per phase."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    after = records[warmup:]
    span = sum(r["step_seconds"] for r in after)
    slots = REAL["orchestrator.episodes_per_worker"]
    if colocated:  # every unit generates between two steps (switch time counted as generating)
        units = REAL["orchestrator.rollout_workers"] + REAL["placement.learner_ranks"]
        slot_seconds = slots * units * sum(r["step_seconds"] - r["learner_seconds"] for r in after)
    else:  # the units serving rollout at each step's end, over that step
        slot_seconds = sum(slots * r.get("rollout_units", REAL["orchestrator.rollout_workers"]) * r["step_seconds"]
                           for r in after)  # fmt: skip
    out = {
        "seconds": round(span, 3),
        "trajectories_per_s": round(sum(r["episodes"] for r in after) / span, 4),
        "steps_per_s": round(len(after) / span, 5),
        "learner_idle_fraction": round(1 - sum(r["learner_seconds"] for r in after) / span, 4),
        "rollout_idle_fraction": round(1 - sum(sum(r["episode_seconds"]) for r in after) / slot_seconds, 4),
        "stale_dropped": records[-1]["stale_dropped"],
    }
    phases: dict[str, list[float]] = {}
    for record in after:
        phases.setdefault(record["phase"], []).append(record["step_seconds"])
    for index, seconds in enumerate(phases.values()):
        out[f"phase{index}_steps_per_s"] = round(len(seconds) / sum(seconds), 5)
    report = run_dir / "multiplex.json"
    switches = json.loads(report.read_text())["switches"] if report.is_file() else []
    switches = [s for s in switches if not s["reason"].startswith(RESTORE)]  # after the last step
    for direction in ("to_learner", "to_rollout"):
        mine = [s["seconds"] for s in switches if s["direction"] == direction]
        out[f"switches_{direction}"] = len(mine)
        out[f"switch_{direction}_s"] = round(statistics.fmean(mine), 4) if mine else 0.0
    return out


def model_from_run(run_dir: Path, switch_runs: list[Path]) -> tuple[TimeModel, list[Phase]]:
    """The time model fitted on a static run's profile (its metrics: each step's mean
    episode and its learner step), the phases of the workload, and what only the
    multiplexed `switch_runs` measure (their `multiplex.json`): switch times, and learner
    steps at other numbers of units (the learner's scaling, `dp_efficiency`).

    The model's generation rate, lengths and tool time are the first phase's; the learner
    is fitted on every step (the phases' different tokens separate its overhead from its
    per-token time). The second phase keeps the first's generation rate: its own episodes'
    measured lengths, and its tool time set so its episodes take their measured time."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    by_phase: dict[str, list[dict]] = {}
    for record in records:
        by_phase.setdefault(record["phase"], []).append(record)

    def episode(record: dict) -> dict:
        n = record["episodes"]
        return {"kind": "episode", "tokens": record["tokens"] / n, "turns": record["turns_mean"],
                "generation_seconds": record["engine_seconds"] / n,
                "tool_seconds": (record["wall_seconds"] - record["engine_seconds"]) / n}  # fmt: skip

    profile = [episode(r) for r in next(iter(by_phase.values()))]
    profile += [
        {"kind": "learner_step", "tokens": r["tokens"], "seconds": r["learner_seconds"],
         "units": REAL["placement.learner_ranks"]}
        for r in records
    ]  # fmt: skip
    for folder in switch_runs:  # their switches, and their learner's steps at other sizes
        report = folder / "multiplex.json"
        if report.is_file():
            data = json.loads(report.read_text())
            profile += [{"kind": "switch", **s} for s in data["switches"]]
            profile += [r for r in data["profile"] if r["kind"] == "learner_step"]
    model = fit(profile)
    phases = []
    for index, (name, mine) in enumerate(by_phase.items()):
        lengths = EmpiricalLengths(tuple((round(r["tokens"] / r["episodes"]), round(r["turns_mean"])) for r in mine))
        steps = len(mine) if index < len(by_phase) - 1 else 10**6
        if index == 0:
            phases.append(Phase(steps, lengths, name=name))
            continue
        episodes = sum(r["episodes"] for r in mine)
        wall = sum(r["wall_seconds"] for r in mine) / episodes
        tool = max(0.0, wall - lengths.mean_tokens() / model.generation_tokens_per_s) / lengths.mean_turns()
        phases.append(Phase(steps, lengths, tool_slowdown=tool / model.tool_seconds_per_turn, name=name))
    return model, phases


def real_half(steps: int, slow_steps: int, workdir: Path) -> tuple[dict[str, dict], dict[str, SimResult], TimeModel]:
    """Each policy run for real on the phase workload, then simulated on the model fitted
    from the static run: ({policy: measured figures}, {policy: SimResult}, the model)."""
    import ray

    from trainer.orchestrator.loop import start_ray

    stream = write_phase_suite(workdir / "suite", slow_steps=slow_steps)
    runs: dict[str, Path] = {}
    started = start_ray(workers=8)
    try:
        for policy in POLICIES:
            began = time.monotonic()
            runs[policy] = real_run(policy, stream, workdir / "runs", steps)
            print(f"bench.perf.multiplex real: {policy} ran in {time.monotonic() - began:.0f} s", file=sys.stderr)
    finally:
        if started:
            ray.shutdown()
    return compare(runs, steps)


def compare(runs: dict[str, Path], steps: int) -> tuple[dict[str, dict], dict[str, SimResult], TimeModel]:
    """The real runs' figures, and each policy simulated on the model fitted from them."""
    real = {policy: measured(folder, colocated=policy == "colocated") for policy, folder in runs.items()}
    model, phases = model_from_run(runs["static"], [runs["bidirectional"], runs["colocated"]])
    simulated = simulate_configuration(
        model, REAL["orchestrator.rollout_workers"] + REAL["placement.learner_ranks"],
        episodes_per_step=REAL["orchestrator.episodes_per_step"],
        episodes_per_unit=REAL["orchestrator.episodes_per_worker"], max_staleness=REAL["orchestrator.max_staleness"],
        steps=steps, rollout_units=REAL["orchestrator.rollout_workers"], phases=phases,
        rule=Rule(min_window_steps=REAL["orchestrator.multiplex_window_steps"]),
        window_s=REAL["orchestrator.multiplex_window_s"],
    )  # fmt: skip
    return real, simulated, model


def real_table(real: dict[str, dict], simulated: dict[str, SimResult]) -> str:
    """Real and simulated side by side, with the simulator's error on throughput."""
    lines = [
        "| policy | trajectories/s real | simulated | error | steps/s per phase real | simulated "
        "| learner idle real / sim | rollout idle real / sim | switches to learner / rollout real | sim "
        "| switch s to learner / rollout (real) |",
        "|---|---:|---:|---:|---|---|---|---|---:|---:|---:|",
    ]
    for policy, figures in real.items():
        sim = simulated[policy]
        error = sim.trajectories_per_s / figures["trajectories_per_s"] - 1
        phases = [figures[k] for k in sorted(figures) if k.startswith("phase")]
        lines.append(
            f"| {policy} | {figures['trajectories_per_s']:.3f} | {sim.trajectories_per_s:.3f} | {error:+.1%} | "
            f"{', '.join(f'{p:.3f}' for p in phases)} | {', '.join(f'{p:.3f}' for p in sim.phase_steps_per_s)} | "
            f"{figures['learner_idle_fraction']:.1%} / {sim.learner_idle_fraction:.1%} | "
            f"{figures['rollout_idle_fraction']:.1%} / {sim.rollout_idle_fraction:.1%} | "
            f"{figures['switches_to_learner']} / {figures['switches_to_rollout']} | "
            f"{sim.switches_to_learner} / {sim.switches_to_rollout} | "
            f"{figures['switch_to_learner_s']:.2f} / {figures['switch_to_rollout_s']:.2f} |"
        )
    return "\n".join(lines)


def real_figures(real: dict[str, dict], simulated: dict[str, SimResult], model: TimeModel) -> dict[str, float]:
    out: dict[str, float] = {}
    for policy, figures in real.items():
        sim = simulated[policy]
        out.update({f"real_{policy}_{key}": value for key, value in figures.items()})
        out[f"real_{policy}_vs_static"] = round(figures["trajectories_per_s"] / real["static"]["trajectories_per_s"], 4)
        out[f"real_{policy}_simulated_trajectories_per_s"] = round(sim.trajectories_per_s, 4)
        out[f"real_{policy}_simulator_error"] = round(sim.trajectories_per_s / figures["trajectories_per_s"] - 1, 4)
        for index, rate in enumerate(sim.phase_steps_per_s):
            out[f"real_{policy}_simulated_phase{index}_steps_per_s"] = round(rate, 5)
    out.update({f"real_model_{k}": v for k, v in model.to_dict().items() if isinstance(v, float)})
    return out


def figures(name: str, results: dict[str, SimResult], predicted: float | None) -> dict[str, float]:
    """Flat figures of one schedule; `predicted`: the planner's episodes/s for the static
    split, compared where the schedule has one phase (None: not compared)."""
    static = results["static"]
    base = static.trajectories_per_s
    out: dict[str, float] = {
        f"{name}_planned_rollout_units": static.rollout_units,
        f"{name}_planned_learner_units": static.learner_units,
    }
    if predicted is not None:
        out[f"{name}_static_over_planner_prediction"] = round(base / predicted, 4)
    for policy, result in results.items():
        key = f"{name}_{policy}"
        out[f"{key}_steps_per_s"] = round(result.steps_per_s, 6)
        out[f"{key}_trajectories_per_s"] = round(result.trajectories_per_s, 4)
        out[f"{key}_vs_static"] = round(result.trajectories_per_s / base, 4)
        out[f"{key}_rollout_idle_fraction"] = round(result.rollout_idle_fraction, 4)
        out[f"{key}_learner_idle_fraction"] = round(result.learner_idle_fraction, 4)
        out[f"{key}_switches_to_learner"] = result.switches_to_learner
        out[f"{key}_switches_to_rollout"] = result.switches_to_rollout
        out[f"{key}_stale_dropped"] = result.stale_dropped
        for index, rate in enumerate(result.phase_steps_per_s):
            out[f"{key}_phase{index}_steps_per_s"] = round(rate, 6)
    return out


def table(schedules: dict[str, dict[str, SimResult]], phase_names: dict[str, list[str]]) -> str:
    """The markdown table of every schedule and policy (simulated)."""
    lines = [
        "| schedule | policy | trajectories/s | vs static | per phase vs static | rollout idle | learner idle "
        "| switches to learner / rollout | stale dropped |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for name, results in schedules.items():
        static = results["static"]
        for policy, result in results.items():
            phases = ", ".join(
                f"{label} {rate / base:.2f}"
                for label, rate, base in zip(
                    phase_names[name], result.phase_steps_per_s, static.phase_steps_per_s, strict=False
                )
            )
            lines.append(
                f"| {name} | {policy} | {result.trajectories_per_s:.3f} | "
                f"{result.trajectories_per_s / static.trajectories_per_s:.2f}x | {phases} | "
                f"{result.rollout_idle_fraction:.1%} | {result.learner_idle_fraction:.1%} | "
                f"{result.switches_to_learner} / {result.switches_to_rollout} | {result.stale_dropped} |"
            )
    return "\n".join(lines)


def load_model(path: Path) -> TimeModel:
    """A time model from JSON; a bad file is one line naming it."""
    try:
        return TimeModel.from_dict(json.loads(path.read_text()))
    except OSError as exc:
        raise SystemExit(f"{PROG}: {path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise SystemExit(f"{PROG}: {path}: not JSON: {exc}") from None
    except TimeModelError as exc:
        raise SystemExit(f"{PROG}: {path}: {exc}") from None


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Simulated throughput of BiDiRL's device sharing: a static split from the planner, "
            "colocated time-sharing and the bidirectional scheduler, side by side on the same "
            "episodes (the published heavy-tailed shape at 32 units, or a time model measured "
            "here). Prints a markdown table and writes flat JSON. Takes about 15 s on 2 cores."
        ),
        epilog="example: python -m bench.perf.multiplex --steps-per-phase 10 --json /tmp/multiplex.json",
    )
    parser.add_argument("--time-model", type=Path, help="a TimeModel JSON to simulate instead of the published shape")
    parser.add_argument("--units", type=int, help=f"devices in all (default {UNITS}; required with --time-model)")
    parser.add_argument("--episodes-per-step", type=int, default=None, help=f"default {EPISODES_PER_STEP}")
    parser.add_argument("--episodes-per-unit", type=int, default=None, help=f"default {EPISODES_PER_UNIT}")
    parser.add_argument("--max-staleness", type=int, default=MAX_STALENESS)
    parser.add_argument("--steps-per-phase", type=int, default=STEPS_PER_PHASE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--real",
        action="store_true",
        help="also the real half: static, colocated and bidirectional trained on this machine (the tiny model, "
        "local sandboxes, 4 units) on a workload of slow episodes then a slow learner, and each simulated on the "
        "time model fitted from the static run: about 15 minutes on 2 cores",
    )
    parser.add_argument("--real-steps", type=int, default=REAL_STEPS, help="learner steps of each real run")
    parser.add_argument("--slow-steps", type=int, default=REAL_SLOW_STEPS, help="steps of the slow-episode phase")
    parser.add_argument("--workdir", type=Path, help="keep the real runs' folders here (default: a temporary one)")
    parser.add_argument(
        "--real-runs", type=Path, help="compare the runs already under DIR/runs (a --workdir) instead of training"
    )
    parser.add_argument(
        "--json", "--out", dest="json", type=Path, default=RESULTS / "multiplex.json", help="where to write the figures"
    )
    args = parser.parse_args(argv)
    if args.time_model is not None and args.units is None:
        parser.error("--time-model needs --units (the devices of the run it describes)")
    if args.steps_per_phase <= WARMUP_STEPS:
        parser.error(f"--steps-per-phase must exceed the {WARMUP_STEPS} warm-up steps")
    return args


def main(argv: list[str] | None = None) -> dict[str, float]:
    from sandboxes.console import setup_logging

    args = parse(argv)
    setup_logging()
    steps = args.steps_per_phase
    if args.time_model is None:
        model, units = published_model(), UNITS
        per_step, per_unit = args.episodes_per_step or EPISODES_PER_STEP, args.episodes_per_unit or EPISODES_PER_UNIT
        schedules = published_schedules(steps)
        label = f"published shape, {units} units"
    else:
        model, units = load_model(args.time_model), args.units
        per_step, per_unit = args.episodes_per_step or 8, args.episodes_per_unit or 2
        schedules = {"measured": [Phase(steps, name="as profiled")], "forced": forced_schedule(steps)}
        label = f"time model {args.time_model}, {units} units"
    results: dict[str, dict[str, SimResult]] = {}
    flat: dict[str, float] = {"units": units, "episodes_per_step": per_step, "episodes_per_unit": per_unit}
    flat["max_staleness"] = args.max_staleness
    flat.update({f"model_{k}": v for k, v in model.to_dict().items() if isinstance(v, float)})
    for name, phases in schedules.items():
        results[name] = simulate_configuration(
            model, units, episodes_per_step=per_step, episodes_per_unit=per_unit,
            max_staleness=args.max_staleness, steps=steps * len(phases), phases=phases, seed=args.seed,
            progress=f"bench.perf.multiplex {name}",
        )  # fmt: skip
        static = results[name]["static"]
        predicted = None
        if len(phases) == 1:  # the fluid model knows no phases: compared on steady runs only
            predicted = predict(
                model, static.rollout_units, static.learner_units, per_step, episodes_per_unit=per_unit,
                max_staleness=args.max_staleness, lengths=phases[0].lengths,
            ).throughput  # fmt: skip
        flat.update(figures(name, results[name], predicted))
    print(f"bench.perf.multiplex (SIMULATED: {label}; {per_step} episodes a step, {per_unit} per unit)\n")
    print(table(results, {name: [p.name for p in phases] for name, phases in schedules.items()}))
    if args.real_runs is not None:
        args.real = True
    if args.real:
        import os

        load = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix="bench-multiplex-") as tmp:
            if args.real_runs is not None:
                runs = {policy: args.real_runs / "runs" / policy for policy in POLICIES}
                real, simulated, measured_model = compare(runs, args.real_steps)
            else:
                real, simulated, measured_model = real_half(args.real_steps, args.slow_steps, args.workdir or Path(tmp))
        load = (load + os.getloadavg()[0]) / 2
        flat["real_load_average"] = round(load, 2)
        flat["real_cpus"] = os.cpu_count()
        print(f"\nbench.perf.multiplex (REAL: this machine, 4 units, {args.real_steps} steps: {args.slow_steps} of slow "
              "episodes, then a slow learner; SIMULATED: the same configuration on the model fitted from the "
              f"static run; load average {load:.1f} on {os.cpu_count()} CPUs)\n")  # fmt: skip
        print(real_table(real, simulated))
        print(f"\nfitted model: {json.dumps(measured_model.summary())}")
        flat.update(real_figures(real, simulated, measured_model))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(flat, indent=2) + "\n")
    print(f"\nwritten: {args.json}")
    return flat


if __name__ == "__main__":
    main()
