"""The `hf` engine: sampling with a transformers causal LM on CPU (or one GPU).

A plain incremental-decoding loop over the model's KV cache rather than
`model.generate`, so the logprob of every sampled token is computed from exactly the
distribution it was drawn from, with no logits processors in between.
"""

from __future__ import annotations

import inspect

import torch

from trainer.engines.base import Generation


class HFEngine:
    """Generates with its own copy of the policy; `load_weights` publishes a new version."""

    def __init__(self, model: torch.nn.Module, *, version: int = 0) -> None:
        self.model = model.eval()
        self.version = version
        # transformers 5 renamed the KV-cache argument and output `past_key_values` -> `cache`.
        self._cache_name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    @torch.no_grad()
    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Copy the learner's weights in place and take its version number."""
        missing, unexpected = self.model.load_state_dict(state_dict, strict=False)
        if unexpected or [k for k in missing if not k.endswith("lm_head.weight")]:
            raise ValueError(f"weights do not match the engine's model: missing {missing}, unexpected {unexpected}")
        self.version = version

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        stop_token_ids: tuple[int, ...] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        return [self._one(p, max_new_tokens, temperature, set(stop_token_ids), generator) for p in prompts]

    def _one(self, prompt: list[int], max_new_tokens: int, temperature: float, stop: set[int], generator) -> Generation:
        if not prompt:
            raise ValueError("prompt must hold at least one token")
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([prompt], device=device)
        past = None
        tokens: list[int] = []
        logprobs: list[float] = []
        finish = "length"
        for _ in range(max_new_tokens):
            out = self.model(input_ids=input_ids, use_cache=True, **{self._cache_name: past})
            past = out[self._cache_name]
            logits = out.logits[0, -1].float()
            if temperature > 0:
                log_dist = torch.log_softmax(logits / temperature, dim=-1)
                token = int(torch.multinomial(log_dist.exp().cpu(), 1, generator=generator))
            else:
                log_dist = torch.log_softmax(logits, dim=-1)
                token = int(log_dist.argmax())
            tokens.append(token)
            logprobs.append(float(log_dist[token]))
            if token in stop:
                finish = "stop"
                break
            input_ids = torch.tensor([[token]], device=device)
        return Generation(tokens, logprobs, self.version, finish)
