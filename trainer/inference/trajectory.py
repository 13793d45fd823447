"""`Trajectory`: one episode as the learner sees it, token by token.

Everything is recorded at generation time and never re-derived: the token ids of every
turn (the model's own ids, never re-tokenized), which tokens the policy produced, the
logprob the inference engine gave each of them, and the policy version that produced it.
Plain lists, so trajectories cross process boundaries cheaply and need no torch.

Beyond the tokens, every field is typed and has one writer: the rollout fills in the
episode's outcome (`resolved` ... `reward_hack_blocked`), what it cost (`sandbox_start` ...
`wall_seconds`, see `trainer.inference.cost`) and, for PATR trees, the branch
(`branch_id`, `parent`, `branch_token`, `pruned`); the orchestrator's schedule fills in its
bookkeeping (`trajectory_id` ... `staleness`). Nothing is passed through an untyped dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
    group_id: str = ""
    """Rollouts sharing a group id form one group for group baselines (GRPO); the task id
    when empty."""

    # The outcome, written by the rollout when the episode ends.
    resolved: bool = False
    """The grader resolved the task (every required test passed)."""
    end: str | None = None
    """Why the episode ended: `finish`, `max_turns`, `token_limit`, `pruned:<reason>`..."""
    patch: str = ""
    """The diff the agent left in the workspace (what was graded)."""
    turns: int = 0
    """Agent turns taken."""
    format_errors: int = 0
    """Turns whose action could not be parsed as a tool call."""
    reward_hack_blocked: list[str] = field(default_factory=list)
    """Grading rules the agent's change tripped (each one scores 0; `agent_env.grading`)."""

    # What the episode cost, written by the rollout (`trainer.inference.cost`). Seconds of
    # the env's clock; a tree's branches each count their own part, so they add up to the tree.
    sandbox_start: str = ""
    """How the agent's sandbox started: `cold`, `warm` (from a warm pool) or `fork` (a PATR
    branch forked from its parent)."""
    sandbox_start_seconds: float = 0.0
    """Waiting for the sandbox before the first turn (a start, a pool's hand-over, a fork)."""
    tool_seconds: float = 0.0
    """In the agent's tool calls, in the sandbox."""
    grading_seconds: float = 0.0
    """Taking the final diff and running the hidden tests; the four fields below split it."""
    grading_setup_seconds: float = 0.0
    """Of grading: the diff, the grading sandbox's start, applying the patches."""
    test_run_seconds: float = 0.0
    """Of grading: the verdict run of the required tests."""
    canary_seconds: float = 0.0
    """Of grading: the canary twins (their forks and runs)."""
    grading_teardown_seconds: float = 0.0
    """Of grading: closing its sandboxes."""
    close_seconds: float = 0.0
    """Closing the agent's sandbox at the episode's end."""
    graded_from_memo: bool = False
    """Its verdict was one given before to the same diff (`agent_env.grading.memo`)."""
    engine_seconds: float = 0.0
    """Waiting on the engine for the policy's replies (queueing for it included)."""
    sandbox_seconds: float = 0.0
    """Sandbox time used: the agent's sandbox's lifetime plus the grading sandboxes' time."""
    wall_seconds: float = 0.0
    """The rollout's wall time for this trajectory (a tree's branch: its own turns)."""

    # PATR trees (`trainer.inference.rollout.tree`); defaults for linear episodes.
    branch_id: str = ""
    """This branch's id in its tree (`<tree>/<n>`)."""
    parent: str | None = None
    """The branch this one forked from (None: the root)."""
    branch_token: int = 0
    """Index of the first token this branch does not share with its parent."""
    pruned: bool = False
    """Ended early by the tree (degenerate or low-scoring); graded as it stood."""

    # The schedule's bookkeeping (`trainer.orchestrator.schedule`).
    trajectory_id: str = ""
    """Unique in a run: the episode job's id, with `.<branch>` for tree rollouts."""
    family: str = ""
    """The task's family (curricula learn per family)."""
    attempt: int = 0
    """Infrastructure retries before this episode succeeded."""
    episode_seconds: float = 0.0
    """Wall time of the episode (all branches of a tree)."""
    staleness: int = 0
    """Policy versions its oldest token lagged behind the learner when consumed."""

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
