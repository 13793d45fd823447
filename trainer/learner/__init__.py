"""The learner: policy and critic updates from finished trajectories.

- `learner`: `Learner` (models, optimizers, version, guards; one step loop, every
  optimizer step) and `StepResult`.
- `objectives/`: one `Objective` interface, returning losses from a `Models` view; a
  separate critic (SAO, PPO, decoupled PPO), group baselines (GRPO, Dr.GRPO, DAPO) and
  SAPO's shared policy-value backbone.
- `advantages`: each trajectory's mean advantage across ranks; SE-RL's family weights.
- `batching`: packing by token budget, padding, each rank's share, each loss's weight.
- `logprobs`: token logprobs as the policy samples them (value tokens banned).
- `warm_start`: the supervised warm start's loss on demonstrations.
- `checkpoint`: atomic save and load, on any number of ranks.
"""

from trainer.learner.batching import pack_by_tokens
from trainer.learner.checkpoint import CheckpointError
from trainer.learner.learner import Learner, NonFiniteError, StepResult
from trainer.learner.logprobs import policy_logits, target_logprobs, token_logprobs

__all__ = [
    "CheckpointError",
    "Learner",
    "NonFiniteError",
    "StepResult",
    "pack_by_tokens",
    "policy_logits",
    "target_logprobs",
    "token_logprobs",
]
