"""BiDiRL's three ways to share devices between rollout and training, simulated (issue #21).

    python -m bench.multiplex [--time-model FILE.json --units N] [--episodes-per-step B]
                              [--episodes-per-unit E] [--max-staleness S]
                              [--steps-per-phase N] [--seed S] [--json PATH]

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
here is simulated: only the real half measures this machine (switch times, throughput).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.common import RESULTS
from trainer.orchestrator.multiplex import (
    POLICIES,
    LogNormalLengths,
    Phase,
    Rule,
    SimConfig,
    SimResult,
    TimeModel,
    TimeModelError,
    plan,
    predict,
    simulate,
)

PROG = "python -m bench.multiplex"
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
        epilog="example: python -m bench.multiplex --steps-per-phase 10 --json /tmp/multiplex.json",
    )
    parser.add_argument("--time-model", type=Path, help="a TimeModel JSON to simulate instead of the published shape")
    parser.add_argument("--units", type=int, help=f"devices in all (default {UNITS}; required with --time-model)")
    parser.add_argument("--episodes-per-step", type=int, default=None, help=f"default {EPISODES_PER_STEP}")
    parser.add_argument("--episodes-per-unit", type=int, default=None, help=f"default {EPISODES_PER_UNIT}")
    parser.add_argument("--max-staleness", type=int, default=MAX_STALENESS)
    parser.add_argument("--steps-per-phase", type=int, default=STEPS_PER_PHASE)
    parser.add_argument("--seed", type=int, default=0)
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
            progress=f"bench.multiplex {name}",
        )  # fmt: skip
        static = results[name]["static"]
        predicted = None
        if len(phases) == 1:  # the fluid model knows no phases: compared on steady runs only
            predicted = predict(
                model, static.rollout_units, static.learner_units, per_step, episodes_per_unit=per_unit,
                max_staleness=args.max_staleness, lengths=phases[0].lengths,
            ).throughput  # fmt: skip
        flat.update(figures(name, results[name], predicted))
    print(f"bench.multiplex (SIMULATED: {label}; {per_step} episodes a step, {per_unit} per unit)\n")
    print(table(results, {name: [p.name for p in phases] for name, phases in schedules.items()}))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(flat, indent=2) + "\n")
    print(f"\nwritten: {args.json}")
    return flat


if __name__ == "__main__":
    main()
