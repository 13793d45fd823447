"""A scripted engine: replays fixed replies. The test double for rollouts and evals.

Like mini-swe-agent's scripted model, it lets every layer above the engine be tested
with real sandboxes and real grading but without a model. Replies are encoded with the
real tokenizer and end with the stop token; their logprobs are 0.0 (probability 1).
"""

from __future__ import annotations

from collections.abc import Callable

from trainer.inference.engines.base import Generation


class ScriptedEngine:
    def __init__(
        self, replies: list[str], encode: Callable[[str], list[int]], stop_token_id: int, *, version: int = 0
    ) -> None:
        self.replies = list(replies)
        self.encode = encode
        self.stop_token_id = stop_token_id
        self.version = version
        self.calls = 0

    def generate(self, prompts, *, max_new_tokens, temperature=1.0, stop_token_ids=(), seed=None):
        out = []
        for _ in prompts:
            if self.calls >= len(self.replies):
                raise RuntimeError(f"scripted engine ran out of replies after {self.calls}")
            ids = self.encode(self.replies[self.calls])[: max_new_tokens - 1] + [self.stop_token_id]
            self.calls += 1
            out.append(Generation(ids, [0.0] * len(ids), self.version, "stop"))
        return out


class ReplayEngine:
    """Replays recorded token ids (and their logprobs), one generation per call: re-running a
    trajectory's exact actions, e.g. to check that a tree branch equals an independent run."""

    def __init__(self, turns: list[tuple[list[int], list[float]]], *, version: int = 0) -> None:
        self.turns = list(turns)
        self.version = version
        self.calls = 0

    def generate(self, prompts, *, max_new_tokens, temperature=1.0, stop_token_ids=(), seed=None):
        out = []
        for _ in prompts:
            if self.calls >= len(self.turns):
                raise RuntimeError(f"replay engine ran out of turns after {self.calls}")
            ids, logprobs = self.turns[self.calls]
            self.calls += 1
            finish = "stop" if ids and ids[-1] in stop_token_ids else "length"
            out.append(Generation(list(ids), list(logprobs), self.version, finish))
        return out
