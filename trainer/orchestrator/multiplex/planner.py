"""The static planner: the initial split of units between rollout and learner (BiDiRL,
arXiv 2607.09207, its "static planner").

For every split with at least one unit per stage, `plan` predicts the steady-state rates of
the two stages from a `TimeModel` (a fluid model: mean episode length, no tail):

- rollout: `R(r) = r * E / tau` episodes/s, where E episodes run on each of the r rollout
  units and `tau = TimeModel.mean_episode_seconds(E)` is one episode's expected wall time;
- learner: one step on `B` episodes of mean `n` tokens over `k` units takes
  `t(k) = TimeModel.learner_step_seconds(B * n, k)`, so `L(k) = B / t(k)` episodes/s;
- pipeline: with `max_staleness >= 1` generation of the next batches overlaps the learner's
  step, so throughput is `X = min(R, L)`; with `max_staleness = 0` nothing overlaps (generate
  a batch, then train on it) and `X = 1 / (1/R + 1/L)`.

It returns the split of largest `X` (ties: the smaller |R - L|, then fewer rollout units)
and every candidate's prediction, so a run logs the model and the choice. BiDiRL's planner
also accounts for placement and memory; this one knows units only (departure: a unit is
interchangeable, as it is on one node of identical devices).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from trainer.orchestrator.multiplex.timemodel import LengthDistribution, TimeModel

__all__ = ["Candidate", "Split", "plan", "predict"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Candidate:
    """One split's predicted per-stage times and rates."""

    rollout_units: int
    learner_units: int
    episode_seconds: float
    rollout_rate: float
    """Episodes/s the rollout units produce when never held back."""
    learner_step_seconds: float
    learner_rate: float
    """Episodes/s the learner consumes when never waiting."""
    throughput: float
    """Predicted episodes/s of the pipeline."""

    @property
    def bottleneck(self) -> str:
        return "rollout" if self.rollout_rate < self.learner_rate else "learner"


@dataclass(frozen=True)
class Split:
    rollout_units: int
    learner_units: int
    predicted: Candidate
    candidates: tuple[Candidate, ...]

    def to_dict(self) -> dict:
        return {
            "rollout_units": self.rollout_units,
            "learner_units": self.learner_units,
            "predicted": {**asdict(self.predicted), "bottleneck": self.predicted.bottleneck},
            "candidates": [{**asdict(c), "bottleneck": c.bottleneck} for c in self.candidates],
        }


def predict(
    model: TimeModel,
    rollout_units: int,
    learner_units: int,
    episodes_per_step: int,
    *,
    episodes_per_unit: int,
    max_staleness: int = 1,
    lengths: LengthDistribution | None = None,
    learner_slowdown: float = 1.0,
) -> Candidate:
    """The fluid model's prediction for one split (see the module docstring)."""
    lengths = lengths or model.episodes
    tau = model.mean_episode_seconds(episodes_per_unit, lengths)
    rollout = rollout_units * episodes_per_unit / tau
    step = model.learner_step_seconds(episodes_per_step * lengths.mean_tokens(), learner_units, learner_slowdown)
    learner = episodes_per_step / step
    throughput = min(rollout, learner) if max_staleness >= 1 else 1 / (1 / rollout + 1 / learner)
    return Candidate(rollout_units, learner_units, tau, rollout, step, learner, throughput)


def plan(
    model: TimeModel,
    units: int,
    episodes_per_step: int,
    *,
    episodes_per_unit: int,
    max_staleness: int = 1,
    lengths: LengthDistribution | None = None,
) -> Split:
    """The split of `units` (>= 2) maximising predicted throughput; logs the model and choice."""
    if units < 2:
        raise ValueError(f"a split needs at least 2 units (one per stage), not {units}")
    if episodes_per_step < 1 or episodes_per_unit < 1:
        raise ValueError("episodes_per_step and episodes_per_unit must be >= 1")
    candidates = tuple(
        predict(
            model,
            r,
            units - r,
            episodes_per_step,
            episodes_per_unit=episodes_per_unit,
            max_staleness=max_staleness,
            lengths=lengths,
        )  # fmt: skip
        for r in range(1, units)
    )
    best = min(candidates, key=lambda c: (-c.throughput, abs(c.rollout_rate - c.learner_rate), c.rollout_units))
    split = Split(best.rollout_units, best.learner_units, best, candidates)
    logger.info(
        "multiplex plan: %d rollout + %d learner units (predicted %.4g episodes/s, %s-bound) from time model %s",
        best.rollout_units, best.learner_units, best.throughput, best.bottleneck, model.summary(lengths),
    )  # fmt: skip
    return split
