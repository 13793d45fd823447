"""`Trajectory`: one episode as the learner sees it, token by token.

Everything is recorded at generation time and never re-derived: the token ids of every
turn (the model's own ids, never re-tokenized), which tokens the policy produced, the
logprob the inference engine gave each of them, and the policy version that produced it.
Plain lists, so trajectories cross process boundaries cheaply and need no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Trajectory:
    task_id: str
    token_ids: list[int] = field(default_factory=list)
    policy_mask: list[bool] = field(default_factory=list)
    """True for tokens the policy sampled; False for prompt and environment tokens."""
    logprobs: list[float] = field(default_factory=list)
    """The engine's logprob of each policy token (0.0 elsewhere)."""
    versions: list[int] = field(default_factory=list)
    """Policy version that sampled each token (-1 for non-policy tokens)."""
    turn_starts: list[int] = field(default_factory=list)
    """Index of the first token the policy produced in each turn."""
    reward: float = 0.0
    terminated: bool = False
    """The episode ended by the agent (finish); False when it was cut by a limit."""
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    group_id: str = ""
    """Rollouts sharing a group id form one group for group baselines (GRPO); the task id
    when empty."""

    def extend(self, ids: list[int], *, policy: bool, logprobs: list[float] | None = None, version: int = -1) -> None:
        if policy:
            if logprobs is None or len(logprobs) != len(ids):
                raise ValueError("policy tokens need one logprob each")
            self.turn_starts.append(len(self.token_ids))
        self.token_ids += ids
        self.policy_mask += [policy] * len(ids)
        self.logprobs += logprobs if policy else [0.0] * len(ids)
        self.versions += [version if policy else -1] * len(ids)

    @property
    def num_policy_tokens(self) -> int:
        return sum(self.policy_mask)

    def __len__(self) -> int:
        return len(self.token_ids)
