"""Curricula over task families: PAC's Thompson-sampling allocator and per-family loss weights.

- `PACController` (PAC, arXiv 2608.30528): how many rollouts each task family gets, from its
  learnability (mean |advantage|) and its progress (recent reward gain).
- `FamilyLossWeights` (SE-RL's transferable idea): per-family loss weights rebalanced during
  training, normalised to mean 1.

Both keep their whole state in plain floats and `state_dict()` is JSON-serialisable, so the
learner's checkpoint (`state.json`) can carry it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence

import torch


def _floats(values: torch.Tensor | Iterable[float]) -> list[float]:
    if isinstance(values, torch.Tensor):
        return values.detach().double().reshape(-1).tolist()
    return [float(v) for v in values]


def _check_families(families: Sequence[str]) -> list[str]:
    families = list(families)
    if not families or len(set(families)) != len(families):
        raise ValueError(f"need a non-empty list of distinct task families, got {families}")
    return families


class PACController:
    """Thompson sampling over task families from learnability and progress (arXiv 2608.30528).

    PAC's formulas are not public; the closest public method is DUMP (UCB over data
    distributions scored by mean |advantage|). What we chose:

    - Each `update(family, advantages, rewards)` observes one score
      `s = mean|A| + progress_weight * gain`, where `gain` is the batch's mean reward minus
      the family's reward EMA before this batch (0 on a family's first batch; with
      `absolute_progress`, |gain|, as in absolute-learning-progress curricula, so a family
      being forgotten also draws rollouts).
    - A Gaussian posterior over each family's mean score with known noise `noise_std` and a
      prior N(prior_mean, noise_std^2 / prior_strength). The family's own sufficient
      statistics are discounted by `discount` before each new observation (discounted
      Thompson sampling, Raj & Kalyani 2017), so the posterior tracks recent batches of a
      non-stationary learner (effective window ~ 1 / (1 - discount) batches).
    - `allocate(n, rng)` gives each family `floor(min_share * n)` rollouts, then draws the rest
      one by one: sample every family's mean from its posterior, the largest gets the rollout.
      So a family's share is its posterior probability of being the best, not winner-takes-all.
    Default scales assume rewards in [0, 1] (binary test outcomes), where mean |A| <= 0.5.
    """

    def __init__(
        self,
        families: Sequence[str],
        *,
        progress_weight: float = 1.0,
        discount: float = 0.9,
        prior_mean: float = 0.5,
        prior_strength: float = 1.0,
        noise_std: float = 0.25,
        reward_smoothing: float = 0.5,
        min_share: float = 0.0,
        absolute_progress: bool = False,
    ) -> None:
        families = _check_families(families)
        if not 0.0 <= min_share * len(families) <= 1.0:
            raise ValueError(f"min_share {min_share} for {len(families)} families exceeds the whole allocation")
        if not 0.0 < discount <= 1.0 or prior_strength <= 0 or noise_std <= 0:
            raise ValueError("need 0 < discount <= 1, prior_strength > 0 and noise_std > 0")
        self.progress_weight, self.discount = progress_weight, discount
        self.prior_mean, self.prior_strength, self.noise_std = prior_mean, prior_strength, noise_std
        self.reward_smoothing, self.min_share, self.absolute_progress = reward_smoothing, min_share, absolute_progress
        self.stats: dict[str, dict[str, float | None]] = {
            f: {"count": 0.0, "score_sum": 0.0, "reward_ema": None, "last_score": None} for f in families
        }

    @property
    def families(self) -> list[str]:
        return list(self.stats)

    def _family(self, family: str) -> dict[str, float | None]:
        try:
            return self.stats[family]
        except KeyError:
            raise ValueError(f"unknown task family {family!r}; known: {self.families}") from None

    def update(
        self, family: str, advantages: torch.Tensor | Iterable[float], rewards: torch.Tensor | Iterable[float]
    ) -> float:
        """Observe one batch of `family`'s rollouts; returns the score observed."""
        stats = self._family(family)
        advantage_list, reward_list = _floats(advantages), _floats(rewards)
        if not advantage_list or not reward_list:
            raise ValueError(f"update for family {family!r} needs at least one advantage and one reward")
        learnability = sum(abs(a) for a in advantage_list) / len(advantage_list)
        mean_reward = sum(reward_list) / len(reward_list)
        ema = stats["reward_ema"]
        gain = 0.0 if ema is None else mean_reward - ema
        if self.absolute_progress:
            gain = abs(gain)
        score = learnability + self.progress_weight * gain
        stats["count"] = self.discount * stats["count"] + 1.0
        stats["score_sum"] = self.discount * stats["score_sum"] + score
        stats["reward_ema"] = (
            mean_reward if ema is None else self.reward_smoothing * ema + (1.0 - self.reward_smoothing) * mean_reward
        )
        stats["last_score"] = score
        return score

    def posterior(self, family: str) -> tuple[float, float]:
        """(mean, std) of the Gaussian posterior over `family`'s mean score."""
        stats = self._family(family)
        precision = self.prior_strength + stats["count"]
        mean = (self.prior_strength * self.prior_mean + stats["score_sum"]) / precision
        return mean, self.noise_std / math.sqrt(precision)

    def allocate(self, n: int, rng: random.Random, families: Sequence[str] | None = None) -> dict[str, int]:
        """Rollout counts per family summing to `n` (every family listed, possibly with 0);
        `families`: only among these (a task stream's phase), default all."""
        if n < 0:
            raise ValueError(f"cannot allocate {n} rollouts")
        among = list(self.stats) if families is None else list(dict.fromkeys(families))
        for family in among:
            self._family(family)  # an unknown one is an error, not a silent zero
        floor = math.floor(self.min_share * n)
        counts = dict.fromkeys(among, floor)
        posteriors = [(f, *self.posterior(f)) for f in among]
        for _ in range(n - floor * len(counts)):
            best = max(posteriors, key=lambda p: rng.gauss(p[1], p[2]))
            counts[best[0]] += 1
        return counts

    def state_dict(self) -> dict:
        """JSON-serialisable: settings and every family's statistics."""
        return {
            "settings": {
                "progress_weight": self.progress_weight,
                "discount": self.discount,
                "prior_mean": self.prior_mean,
                "prior_strength": self.prior_strength,
                "noise_std": self.noise_std,
                "reward_smoothing": self.reward_smoothing,
                "min_share": self.min_share,
                "absolute_progress": self.absolute_progress,
            },
            "families": {f: dict(s) for f, s in self.stats.items()},
        }

    def load_state_dict(self, state: Mapping) -> None:
        """Restore `state_dict()`'s output; settings come from the checkpoint, so a resumed run
        behaves as the saved one did. Families missing from the checkpoint start fresh."""
        known = self.state_dict()["settings"]
        unknown = set(state["settings"]) - set(known)
        if unknown:
            raise ValueError(f"PAC state has unknown settings {sorted(unknown)}")
        for key, value in state["settings"].items():
            setattr(self, key, value)
        for family, stats in state["families"].items():
            self.stats[family] = dict(stats)


class FamilyLossWeights:
    """Per-family loss weights rebalanced during training, mean 1 over families.

    SE-RL's transferable idea (a hybrid multi-environment method that rebalances each
    environment's loss weight); its formula is not public, so we chose: each family keeps an
    exponential moving average (factor `smoothing` on the old value) of a raw need, either

    - `learnability`: mean |advantage| of its recent batches (DUMP's signal), or
    - `failure`: 1 - mean reward, clipped to [0, 1] (rewards in [0, 1]: inversely related to
      recent success),

    and weight_f = floor + (1 - floor) * need_f / mean(need), so weights average 1, the
    weakest family keeps at least `floor`, and the loss scale (hence the learning rate)
    is unchanged on average. Families not yet seen take the mean need (weight 1).
    Apply them by scaling each sequence's advantages (`sequence_weights`), which for the
    policy-gradient losses here equals weighting its loss.
    """

    MODES = ("learnability", "failure")

    def __init__(
        self, families: Sequence[str], *, mode: str = "learnability", smoothing: float = 0.9, floor: float = 0.1
    ) -> None:
        if mode not in self.MODES:
            raise ValueError(f"unknown family weighting {mode!r}; use one of {self.MODES}")
        if not 0.0 <= smoothing < 1.0 or not 0.0 <= floor <= 1.0:
            raise ValueError("need 0 <= smoothing < 1 and 0 <= floor <= 1")
        self.mode, self.smoothing, self.floor = mode, smoothing, floor
        # Empty: the families are registered as they come (`add_families`).
        self.need: dict[str, float | None] = dict.fromkeys(_check_families(families)) if families else {}

    def add_families(self, families: Iterable[str]) -> None:
        """Register families not seen before (weight 1, the mean need, until measured): a
        learner meets them as its batches bring them."""
        for family in families:
            self.need.setdefault(family, None)

    def update(
        self,
        family: str,
        *,
        advantages: torch.Tensor | Iterable[float] | None = None,
        rewards: torch.Tensor | Iterable[float] | None = None,
    ) -> None:
        if family not in self.need:
            raise ValueError(f"unknown task family {family!r}; known: {list(self.need)}")
        source = advantages if self.mode == "learnability" else rewards
        if source is None:
            raise ValueError(
                f"{self.mode} weighting needs {'advantages' if self.mode == 'learnability' else 'rewards'}"
            )
        values = _floats(source)
        if not values:
            raise ValueError(f"update for family {family!r} got no values")
        if self.mode == "learnability":
            observed = sum(abs(v) for v in values) / len(values)
        else:
            observed = min(1.0, max(0.0, 1.0 - sum(values) / len(values)))
        old = self.need[family]
        self.need[family] = observed if old is None else self.smoothing * old + (1.0 - self.smoothing) * observed

    def weights(self) -> dict[str, float]:
        seen = [v for v in self.need.values() if v is not None]
        if not seen:
            return dict.fromkeys(self.need, 1.0)
        top = max(seen)
        if top <= 0.0:  # every family has zero need: nothing to rebalance
            return dict.fromkeys(self.need, 1.0)
        # Needs relative to the largest, so tiny (subnormal) needs keep their precision and
        # the weights still average 1: the ratios are what matter, not the scale.
        relative = [v / top for v in seen]
        default = sum(relative) / len(relative)
        need = {f: default if v is None else v / top for f, v in self.need.items()}
        mean = sum(need.values()) / len(need)
        return {f: self.floor + (1.0 - self.floor) * (v / mean) for f, v in need.items()}

    def sequence_weights(self, families: Sequence[str], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """One weight per sequence [B], from each sequence's task family."""
        weights = self.weights()
        try:
            return torch.tensor([weights[f] for f in families], dtype=dtype)
        except KeyError as exc:
            raise ValueError(f"unknown task family {exc.args[0]!r}; known: {list(self.need)}") from None

    def state_dict(self) -> dict:
        return {"mode": self.mode, "smoothing": self.smoothing, "floor": self.floor, "need": dict(self.need)}

    def load_state_dict(self, state: Mapping) -> None:
        self.mode, self.smoothing, self.floor = state["mode"], state["smoothing"], state["floor"]
        self.need.update(state["need"])
