"""Episodes as token sequences: chat formatting, linear rollouts and tree rollouts (PATR)."""

from trainer.inference.rollout.chat import ChatFormat
from trainer.inference.rollout.episode import run_episode
from trainer.inference.rollout.tree import HeuristicScorer, JudgeScorer, TreeStats, ValueScorer, is_degenerate, run_tree
from trainer.inference.rollout.turns import training_reward

__all__ = [
    "ChatFormat",
    "HeuristicScorer",
    "JudgeScorer",
    "TreeStats",
    "ValueScorer",
    "is_degenerate",
    "run_episode",
    "run_tree",
    "training_reward",
]
