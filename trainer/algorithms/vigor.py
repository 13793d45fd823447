"""VIGOR: variance-guided online rollout allocation for group methods (arXiv 2607.22002).

Round 1 gives every prompt `m0` rollouts. Each later round ranks the prompts still in play
by the variance of all their rewards so far, keeps the top `alpha` of them (rounded up, at
least one), and gives each kept prompt `gamma` times the previous round's rollouts, for `T`
rounds in all; then an unchanged GRPO update over the (unequal) groups. With the paper's
m0=2, alpha=0.5, gamma=2, T=4 and a budget of 8 rollouts per prompt this spends 2 per prompt
per round, the same total as the 8-per-prompt baseline.

Where the paper is silent, we chose (all deterministic, so a run is reproducible):
- Fixed budget: round 1 spends exactly `m0` per prompt (the budget must cover it). Round
  r >= 2 spends the share of what remains that the paper's schedule gives it,
  `floor(remaining * p_r / sum_{j >= r} p_j)` with planned spend `p_r = k_r * m0 * gamma^(r-1)`
  (k_r: kept prompts); the last round spends all that remains. So the schedule is the
  paper's when the budget matches it, is scaled when it does not, never exceeds the budget,
  and spends it exactly. With T = 1 the whole budget is spread evenly (the uniform baseline).
- Leftovers: a round's spend is split evenly over its kept prompts; the remainder goes one
  rollout each to the highest-ranked prompts.
- Ranking and ties: population variance of every reward so far (a prompt with fewer than two
  rewards, e.g. failed rollouts, counts as variance 0); ties keep the order in which
  `first_round` received the prompts (shuffle prompts upstream for random tie-breaks).
- Kept sets are nested (successive halving): a prompt dropped in one round never returns.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence


def _variance(rewards: Sequence[float]) -> float:
    if len(rewards) < 2:
        return 0.0
    mean = sum(rewards) / len(rewards)
    return sum((r - mean) ** 2 for r in rewards) / len(rewards)


class VigorAllocator:
    """Rollout counts per prompt for each of `rounds` rounds, within `budget` rollouts in all.

    Call `first_round(prompt_ids)`, run those rollouts, then `next_round(rewards_so_far)`
    (every reward each prompt has received, all rounds together) until `done`. Each call
    returns `{prompt: new rollouts this round}`, omitting prompts that get none.
    """

    def __init__(self, budget: int, *, m0: int = 2, alpha: float = 0.5, gamma: float = 2.0, rounds: int = 4) -> None:
        if m0 < 2:
            raise ValueError(f"VIGOR needs m0 >= 2 rollouts per prompt to estimate a variance, got {m0}")
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha is the share of prompts kept each round, in (0, 1]; got {alpha}")
        if gamma <= 0 or rounds < 1:
            raise ValueError(f"need gamma > 0 and rounds >= 1; got gamma={gamma}, rounds={rounds}")
        self.budget, self.m0, self.alpha, self.gamma, self.rounds = budget, m0, alpha, gamma, rounds
        self.spent = 0
        self.round = 0
        self._order: dict[Hashable, int] = {}
        self._kept: list[Hashable] = []
        self._plan: list[float] = []

    @property
    def remaining(self) -> int:
        return self.budget - self.spent

    @property
    def done(self) -> bool:
        return self.round >= self.rounds or (self.round > 0 and self.remaining == 0)

    def first_round(self, prompt_ids: Sequence[Hashable]) -> dict[Hashable, int]:
        if self.round:
            raise RuntimeError("first_round was already called; make a new allocator per batch")
        if len(set(prompt_ids)) != len(prompt_ids) or not prompt_ids:
            raise ValueError("first_round needs a non-empty list of distinct prompt ids")
        n = len(prompt_ids)
        if self.budget < self.m0 * n:
            raise ValueError(f"budget {self.budget} cannot give {n} prompts m0={self.m0} rollouts each")
        self._order = {p: i for i, p in enumerate(prompt_ids)}
        self._kept = list(prompt_ids)
        # Planned spend of each round under the paper's schedule, used to split the budget.
        kept, self._plan = n, []
        for r in range(self.rounds):
            if r:
                kept = max(1, math.ceil(self.alpha * kept))
            self._plan.append(kept * self.m0 * self.gamma**r)
        spend = self.m0 * n if self.rounds > 1 else self.budget
        return self._spend(self._kept, spend)

    def next_round(self, rewards_so_far: Mapping[Hashable, Sequence[float]]) -> dict[Hashable, int]:
        if not self.round:
            raise RuntimeError("call first_round before next_round")
        if self.done:
            return {}
        missing = [p for p in self._kept if p not in rewards_so_far]
        if missing:
            raise ValueError(f"next_round has no rewards for prompts {missing[:5]} (of {len(missing)})")
        ranked = sorted(self._kept, key=lambda p: (-_variance(rewards_so_far[p]), self._order[p]))
        self._kept = ranked[: max(1, math.ceil(self.alpha * len(ranked)))]
        r = self.round  # 0-based index of the round being planned
        if r == self.rounds - 1:
            spend = self.remaining
        else:
            spend = math.floor(self.remaining * self._plan[r] / sum(self._plan[r:]))
        return self._spend(self._kept, spend)

    def state_dict(self) -> dict:
        """Everything needed to go on mid-batch, as JSON (prompt ids must be JSON values)."""
        return {
            "budget": self.budget,
            "m0": self.m0,
            "alpha": self.alpha,
            "gamma": self.gamma,
            "rounds": self.rounds,
            "spent": self.spent,
            "round": self.round,
            "order": list(self._order),
            "kept": list(self._kept),
            "plan": list(self._plan),
        }

    @classmethod
    def from_state(cls, state: dict) -> VigorAllocator:
        """The allocator `state_dict` describes, with its own hyper-parameters (a resumed
        batch finishes under the settings it started with)."""
        allocator = cls(
            state["budget"], m0=state["m0"], alpha=state["alpha"], gamma=state["gamma"], rounds=state["rounds"]
        )
        allocator.spent, allocator.round = state["spent"], state["round"]
        allocator._order = {p: i for i, p in enumerate(state["order"])}
        allocator._kept = list(state["kept"])
        allocator._plan = list(state["plan"])
        return allocator

    def _spend(self, ranked: list[Hashable], spend: int) -> dict[Hashable, int]:
        """`spend` rollouts over `ranked` prompts: evenly, the remainder to the first ones."""
        base, extra = divmod(spend, len(ranked))
        counts = {p: base + (i < extra) for i, p in enumerate(ranked)}
        self.round += 1
        self.spent += spend
        return {p: c for p, c in counts.items() if c}
