"""The `Engine` seam: token ids in; token ids, their logprobs and the policy version out.

Engines never see text. Callers build multi-turn prompts by appending token ids, so what
the model produced is never re-tokenized (re-tokenizing can change ids and silently break
the importance ratios the learner computes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class EngineError(RuntimeError):
    """An engine could not produce a generation (a server that kept failing after retries,
    a backend that cannot start). Infrastructure, never the policy's fault: callers retry
    or leave the episode out, and never score it 0."""


class EngineAsleepError(RuntimeError):
    """The engine was put to sleep (its weights and caches freed, so that its device can
    serve a learner rank: BiDiRL's hot switch) and must be woken with weights first."""


@dataclass(frozen=True)
class Generation:
    token_ids: list[int]
    logprobs: list[float]
    """Logprob of each sampled token under the sampling distribution (after temperature)."""
    version: int
    """Version of the weights that produced every token of this generation."""
    finish_reason: str
    """`stop` (a stop token was sampled; it is included) or `length`."""


@runtime_checkable
class Engine(Protocol):
    version: int

    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        stop_token_ids: tuple[int, ...] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        """One generation per prompt."""
        ...
