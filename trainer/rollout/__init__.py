"""Episodes as token sequences: chat formatting and the linear rollout."""

from trainer.rollout.chat import ChatFormat
from trainer.rollout.episode import run_episode

__all__ = ["ChatFormat", "run_episode"]
