"""Rollout and training lend each other their devices: BiDiRL's planner, scheduler and a
simulator (Bidirectional resource scheduling for asynchronous disaggregated RL, arXiv
2607.09207).

The pure, testable core, without Ray or torch:

- `timemodel`: per-stage time models (generation, tools, learner, switches, episode lengths)
  fitted from a short profiling phase; JSON round trip for the run's log.
- `planner`: the initial split of units between rollout and learner that maximises the
  predicted steady-state throughput; every candidate's prediction is returned for the log.
- `policy`: the bidirectional decision rule (`decide`) and the two baselines (`static`,
  `colocated`) as pure functions of a `PoolState`, and the `SignalMeter` that measures the
  wait signals they act on.
- `simulator`: a deterministic discrete-event simulator of the asynchronous pipeline that
  replays those policies on a time model, at any scale (`bench.perf.multiplex`).

docs/multiplex.md has the formulas and the simulated figures.
"""

from trainer.orchestrator.multiplex.planner import Candidate, Split, plan, predict
from trainer.orchestrator.multiplex.policy import (
    LEARNER,
    POLICIES,
    ROLLOUT,
    PoolState,
    Rule,
    SignalMeter,
    Switch,
    UnitState,
    colocated,
    decide,
    static,
)
from trainer.orchestrator.multiplex.simulator import Phase, SimConfig, SimResult, simulate
from trainer.orchestrator.multiplex.timemodel import (
    EmpiricalLengths,
    LogNormalLengths,
    TimeModel,
    TimeModelError,
    fit,
    lengths_from_dict,
)

__all__ = [
    "LEARNER",
    "POLICIES",
    "ROLLOUT",
    "Candidate",
    "EmpiricalLengths",
    "LogNormalLengths",
    "Phase",
    "PoolState",
    "Rule",
    "SignalMeter",
    "SimConfig",
    "SimResult",
    "Split",
    "Switch",
    "TimeModel",
    "TimeModelError",
    "UnitState",
    "colocated",
    "decide",
    "fit",
    "lengths_from_dict",
    "plan",
    "predict",
    "simulate",
    "static",
]
