"""The `hf` engine: batched sampling with a transformers causal LM on CPU (or one GPU).

A plain incremental-decoding loop over the model's KV cache rather than `model.generate`,
so the logprob of every sampled token is computed from exactly the distribution it was
drawn from, with no logits processors in between. Prompts of a batch are left-padded with
explicit position ids, so a padded row computes what it would compute alone.

Prefix reuse: a single-prompt generation keeps the KV cache of everything it processed, in
a small LRU keyed by those token ids. The next turn of the same episode, or every branch of
a tree forked from it, starts from a copy of the longest cached prefix and only computes
the new tokens. A weight update empties the cache (its keys and values are stale).

Banned tokens: SAPO's value readout rows (w+ and w-, `trainer.inference.models.reserve_value_tokens`)
are never sampled: their logits are set to -inf before sampling, so the recorded logprobs
are those of the distribution the learner scores (it bans the same ids). The engine bans
the ids it is given, else those its model's config records (`value_token_ids`, as in a
SAPO checkpoint's export), and rows that a weight update appends to its vocabulary: a
learner that reserved value tokens after this engine was built from the original
checkpoint sends two more rows than the engine has; the engine grows to match and bans
them, since nothing it was built with can have produced them.
"""

from __future__ import annotations

import copy
import inspect
from collections import OrderedDict
from collections.abc import Sequence

import torch

from trainer.inference.engines.base import Generation
from trainer.inference.engines.weights import WeightBucket, WeightSyncError, assemble, make_buckets


def _sample(
    logits: torch.Tensor, temperature: float, generator, banned: tuple[int, ...] = ()
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row of [B, V] logits (greedy at temperature 0) and its logprob under the
    distribution it was drawn from; `banned` ids get no probability mass."""
    if banned:
        logits = logits.index_fill(-1, torch.tensor(banned), -torch.inf)
    if temperature > 0:
        log_dist = torch.log_softmax(logits / temperature, dim=-1)
        sampled = torch.multinomial(log_dist.exp(), 1, generator=generator).squeeze(-1)
    else:
        log_dist = torch.log_softmax(logits, dim=-1)
        sampled = log_dist.argmax(-1)
    return sampled, log_dist.gather(-1, sampled.unsqueeze(-1)).squeeze(-1)


class HFEngine:
    """Generates with its own copy of the policy; weight updates publish new versions."""

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        version: int = 0,
        pad_id: int = 0,
        prefix_cache_size: int = 16,
        banned_token_ids: Sequence[int] | None = None,
    ) -> None:
        self.model = model.eval()
        if banned_token_ids is None:  # default: what the checkpoint records (SAPO's value tokens)
            banned_token_ids = getattr(model.config, "value_token_ids", None) or ()
        self.banned_token_ids: tuple[int, ...] = tuple(sorted({int(i) for i in banned_token_ids}))
        """Token ids this engine never samples."""
        self.version = version
        self.pad_id = pad_id
        self.prefix_cache_size = prefix_cache_size
        self._prefixes: OrderedDict[tuple[int, ...], object] = OrderedDict()
        self.prompt_tokens = 0
        """Prompt tokens seen by single-prompt generations."""
        self.reused_tokens = 0
        """Of those, tokens whose keys and values came from the prefix cache."""
        # transformers 5 renamed the KV-cache argument and output `past_key_values` -> `cache`.
        self._cache_name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    # -- weights ----------------------------------------------------------------------------
    @torch.no_grad()
    def update_weights(self, buckets: list[WeightBucket]) -> None:
        """Apply a complete, verified update; on any error the engine keeps its weights."""
        version, state = assemble(buckets, current_version=self.version)
        self._grow_vocabulary(state)
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        if unexpected or [k for k in missing if not k.endswith("lm_head.weight")]:
            raise WeightSyncError(
                f"weights do not match the engine's model: missing {missing}, unexpected {unexpected}"
            )
        self.version = version
        self._prefixes.clear()

    def _grow_vocabulary(self, state: dict[str, torch.Tensor]) -> None:
        """Match a learner that appended vocabulary rows (SAPO's value tokens) and ban them.
        Checked before anything changes: any other shape mismatch leaves the model as it was."""
        embeddings = self.model.get_input_embeddings().weight
        name = next((n for n, p in self.model.named_parameters() if p is embeddings), None)
        rows = embeddings.shape[0]
        if name not in state or state[name].shape[0] <= rows:
            return
        grown = state[name].shape[0]
        own = self.model.state_dict()
        for key, tensor in state.items():
            if key in own and tuple(tensor.shape) != tuple(own[key].shape):
                vocabulary_sized = own[key].shape[0] == rows and tuple(tensor.shape[1:]) == tuple(own[key].shape[1:])
                if not (vocabulary_sized and tensor.shape[0] == grown):
                    raise WeightSyncError(f"weights do not match the engine's model: {key} is {tuple(tensor.shape)}")
        self.model.resize_token_embeddings(grown, mean_resizing=False)
        self.banned_token_ids = tuple(sorted({*self.banned_token_ids, *range(rows, grown)}))

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Convenience for in-process learners: bucket, checksum and apply `state_dict`."""
        self.update_weights(make_buckets(state_dict, version))

    # -- generation -------------------------------------------------------------------------
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
        if not prompts or any(not p for p in prompts):
            raise ValueError("every prompt must hold at least one token")
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        if len(prompts) == 1 and self.prefix_cache_size:
            return [self._generate_reusing_prefix(prompts[0], max_new_tokens, temperature, stop_token_ids, generator)]
        device = next(self.model.parameters()).device
        width = max(len(p) for p in prompts)
        size = len(prompts)
        input_ids = torch.full((size, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((size, width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
            attention[row, width - len(prompt) :] = 1
        input_ids, attention = input_ids.to(device), attention.to(device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        stop = torch.tensor(sorted(stop_token_ids), dtype=torch.long)
        tokens: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        finished = torch.zeros(size, dtype=torch.bool)
        past = None
        for _ in range(max_new_tokens):
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention,
                position_ids=positions,
                use_cache=True,
                **{self._cache_name: past},
            )
            past = out[self._cache_name]
            logits = out.logits[:, -1].float().cpu()
            sampled, chosen = _sample(logits, temperature, generator, self.banned_token_ids)
            for row in range(size):
                if not finished[row]:
                    tokens[row].append(int(sampled[row]))
                    logprobs[row].append(float(chosen[row]))
            finished |= torch.isin(sampled, stop)
            if bool(finished.all()):
                break
            # Finished rows keep decoding pad tokens (masked out) so the batch stays aligned.
            next_ids = torch.where(finished, torch.full_like(sampled, self.pad_id), sampled).to(device)
            input_ids = next_ids.unsqueeze(-1)
            attention = torch.cat([attention, (~finished).long().unsqueeze(-1).to(device)], dim=-1)
            positions = positions[:, -1:] + 1
        return [
            Generation(t, lp, self.version, "stop" if t and t[-1] in stop_token_ids else "length")
            for t, lp in zip(tokens, logprobs, strict=True)
        ]

    def _lookup(self, prompt: list[int]) -> tuple[int, object | None]:
        """The longest cached prefix of `prompt` (shorter than it: the last prompt token must
        be fed to get logits), as (length, a private copy of its cache)."""
        best: tuple[int, ...] = ()
        for key in self._prefixes:
            if len(best) < len(key) < len(prompt) and tuple(prompt[: len(key)]) == key:
                best = key
        if not best:
            return 0, None
        self._prefixes.move_to_end(best)
        return len(best), copy.deepcopy(self._prefixes[best])

    def _generate_reusing_prefix(
        self, prompt: list[int], max_new_tokens: int, temperature: float, stop_token_ids, generator
    ) -> Generation:
        device = next(self.model.parameters()).device
        start, past = self._lookup(prompt)
        self.prompt_tokens += len(prompt)
        self.reused_tokens += start
        feed = torch.tensor([prompt[start:]], device=device)
        position = start
        tokens: list[int] = []
        logprobs: list[float] = []
        for _ in range(max_new_tokens):
            positions = torch.arange(position, position + feed.shape[1], device=device).unsqueeze(0)
            out = self.model(input_ids=feed, position_ids=positions, use_cache=True, **{self._cache_name: past})
            past = out[self._cache_name]
            position += feed.shape[1]
            logits = out.logits[0, -1].float().cpu()
            sampled, chosen = _sample(logits.unsqueeze(0), temperature, generator, self.banned_token_ids)
            token = int(sampled[0])
            tokens.append(token)
            logprobs.append(float(chosen[0]))
            if token in stop_token_ids:
                break
            feed = torch.tensor([[token]], device=device)
        # The cache now holds the prompt and every sampled token but the last (never fed).
        self._prefixes[tuple(prompt + tokens[:-1])] = past
        while len(self._prefixes) > self.prefix_cache_size:
            self._prefixes.popitem(last=False)
        finish = "stop" if tokens and tokens[-1] in stop_token_ids else "length"
        return Generation(tokens, logprobs, self.version, finish)
