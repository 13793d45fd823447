"""The `hf` engine: batched sampling with a transformers causal LM on CPU (or one GPU).

A plain incremental-decoding loop over the model's KV cache rather than `model.generate`,
so the logprob of every sampled token is computed from exactly the distribution it was
drawn from, with no logits processors in between. Prompts of a batch are left-padded with
explicit position ids, so a padded row computes what it would compute alone.

Prefix reuse: a generation keeps the KV cache of everything it processed, in a small LRU
keyed by those token ids. The next turn of the same episode, or every branch of a tree
forked from it, starts from a copy of the longest cached prefix and only computes the new
tokens. A weight update empties the cache (its keys and values are stale). A batch of
prompts reuses prefixes too, and rows may join it between decode steps (`Decode`,
continuous batching): each row computes its uncached prompt alone, its cache is stacked
into the batch's left-padded one, one forward per step decodes every live row, and a row
that finishes (its stop token or its own token budget) leaves the batch at once, its cache
kept in the LRU. This is what lets a worker batch the turns of its concurrent episodes as
they arrive (`trainer.orchestrator.turn_batching.TurnBatcher`) without recomputing their prompts.

Seeds: `seed` seeds one generator for the whole call; `seeds` (one per prompt) gives each
row its own generator, drawn exactly as the row alone would draw it, so an episode's
samples do not depend on which other episodes shared its batch or when it joined (up to
float rounding of the batched forward: token-identical in the tests and `bench.perf.rollout`).

Sleep (BiDiRL's hot switch, arXiv 2607.09207): `sleep()` frees the model's parameter storage
(each tensor keeps its shape, so nothing else about the module changes), the prefix cache
and the per-row decode state, so that the device (here a CPU slot and its memory) can serve
a learner rank; `wake(state_dict, version)` allocates the storage again and loads the
weights the learner hands over. BiDiRL sleeps vLLM and keeps the weights nowhere (the
learner holds newer ones); the hf engine does the same: no CPU copy is kept, so waking
always takes weights. The rotary tables (non-persistent buffers, derived from the config,
kilobytes) stay. A woken engine generates exactly what a fresh engine with those weights
generates: the same parameters, and an empty prefix cache.

Banned tokens: SAPO's value readout rows (w+ and w-, `trainer.inference.models.reserve_value_tokens`)
are never sampled: their logits are set to -inf before sampling, so the recorded logprobs
are those of the distribution the learner scores (it bans the same ids). The engine bans
the ids it is given, else those its model's config records (`value_token_ids`, as in a
SAPO checkpoint's export), and rows that a weight update appends to its vocabulary: a
learner that reserved value tokens after this engine was built from the original
checkpoint sends two more rows than the engine has; the engine grows to match and bans
them, since nothing it was built with can have produced them.

Over 450 lines on purpose: `Decode` (the continuous batch) is the engine's own decoding
loop: it reads and fills the engine's prefix cache in the engine's KV layout, which nothing
outside this module touches.
"""

from __future__ import annotations

import copy
import inspect
from collections import OrderedDict
from collections.abc import Sequence

import torch

from trainer.inference.engines.base import EngineAsleepError, Generation
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

    batches_rows = True
    """`generate` takes `seeds`, one per prompt: a worker may batch its episodes' turns."""

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
        """Prompt tokens seen by generations that reuse cached prefixes (the prefix cache on)."""
        self.reused_tokens = 0
        """Of those, tokens whose keys and values came from the prefix cache."""
        # transformers 5 renamed the KV-cache argument and output `past_key_values` -> `cache`.
        self._cache_name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self._freed: dict[int, int] | None = None
        """While asleep: each parameter's storage size in bytes (by `id`), to allocate on wake."""

    @property
    def asleep(self) -> bool:
        """Whether `sleep` freed the weights (generation refused until `wake`)."""
        return self._freed is not None

    def _check_awake(self, what: str) -> None:
        if self._freed is not None:
            raise EngineAsleepError(
                f"the hf engine is asleep (sleep() freed its weights): call wake(state_dict, version) before {what}"
            )

    # -- sleep and wake (BiDiRL's hot switch) ---------------------------------------------------
    def sleep(self) -> int:
        """Free the parameters' storage, the prefix cache and the decode state; returns the
        bytes freed (0 when already asleep). Callers make sure no `Decode` is live on this
        engine (a worker sleeps only when idle)."""
        if self._freed is not None:
            return 0
        freed: dict[int, int] = {}
        released = 0
        storages: set[int] = set()
        for parameter in self.model.parameters():  # tied parameters come once
            storage = parameter.untyped_storage()
            freed[id(parameter)] = storage.nbytes()
            if storage.data_ptr() not in storages:  # two views of one storage: freed once
                storages.add(storage.data_ptr())
                released += storage.nbytes()
                storage.resize_(0)
        self._prefixes.clear()
        self._freed = freed
        return released

    @torch.no_grad()
    def wake(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Allocate the weights again and load `state_dict` as `version` (any version: an
        engine without weights has none to be newer than). Every parameter must be in it;
        on an error the engine stays asleep."""
        if self._freed is None:
            raise RuntimeError("the hf engine is awake: wake() only after sleep(); load_weights() updates it")
        for parameter in self.model.parameters():
            storage = parameter.untyped_storage()
            if storage.nbytes() == 0:
                storage.resize_(self._freed[id(parameter)])
        try:  # in-process weights: no buckets to checksum (`load_weights` makes them for the wire)
            self._apply(dict(state_dict), version, complete=True)
        except BaseException:
            self._freed = None
            self.sleep()  # back to sleep, recording the parameters as they are now
            raise
        self._freed = None

    # -- weights ----------------------------------------------------------------------------
    @torch.no_grad()
    def update_weights(self, buckets: list[WeightBucket]) -> None:
        """Apply a complete, verified update; on any error the engine keeps its weights."""
        self._check_awake("updating its weights")
        version, state = assemble(buckets, current_version=self.version)
        self._apply(state, version, complete=False)

    def _apply(self, state: dict[str, torch.Tensor], version: int, *, complete: bool) -> None:
        """Load a verified `state` as `version`. `complete`: every parameter must be in it
        (waking: a parameter left out would hold uninitialised memory); otherwise the tied
        output head may be left out (it is the embedding)."""
        self._grow_vocabulary(state)
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        if complete:  # a parameter tied to a loaded one (lm_head to the embedding) is loaded
            loaded = {id(p) for name, p in self.model.named_parameters(remove_duplicate=False) if name in state}
            missing = [n for n, p in self.model.named_parameters(remove_duplicate=False) if id(p) not in loaded]
        else:
            missing = [k for k in missing if not k.endswith("lm_head.weight")]
        if unexpected or missing:
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
        seeds: Sequence[int | None] | None = None,
    ) -> list[Generation]:
        """One generation per prompt; `seeds`, one per prompt, instead of `seed`: each row
        samples from its own generator (see the module docstring)."""
        self._check_awake("generating")
        if not prompts or any(not p for p in prompts):
            raise ValueError("every prompt must hold at least one token")
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts: give one per prompt")
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        if seeds is not None:
            generators = [torch.Generator().manual_seed(s) if s is not None else None for s in seeds]
            if len(prompts) == 1:
                generator = generators[0]
        if self.prefix_cache_size:  # one prompt or many: each from its longest cached prefix
            decode = Decode(self, temperature=temperature, stop_token_ids=stop_token_ids, generator=generator)
            rows = [
                decode.add(prompt, max_new_tokens, generators[i] if seeds is not None else None)
                for i, prompt in enumerate(prompts)
            ]
            while decode.rows:
                decode.step()
            return [row.generation for row in rows]
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
            if seeds is not None:
                sampled, chosen = _sample_each(logits, temperature, generators, self.banned_token_ids)
            else:
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


def _sample_each(
    logits: torch.Tensor, temperature: float, generators: list, banned: tuple[int, ...] = ()
) -> tuple[torch.Tensor, torch.Tensor]:
    """`_sample` with a generator per row of [B, V] logits: each row draws as it would alone
    (greedy rows need no generator: one batched argmax)."""
    if temperature == 0:
        return _sample(logits, 0.0, None, banned)
    drawn = [_sample(logits[row : row + 1], temperature, g, banned) for row, g in enumerate(generators)]
    return torch.cat([d[0] for d in drawn]), torch.cat([d[1] for d in drawn])


def _layers(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.keys, layer.values) for layer in cache.layers]


def _as_cache(layers: list[tuple[torch.Tensor, torch.Tensor]]):
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=layers)


def _left_pad(tensor: torch.Tensor, width: int) -> torch.Tensor:
    """[B, H, T, D] keys or values left-padded with zeros to T = `width` (masked by the caller)."""
    missing = width - tensor.shape[2]
    if missing <= 0:
        return tensor
    return torch.cat([tensor.new_zeros((*tensor.shape[:2], missing, tensor.shape[3])), tensor], dim=2)


class DecodeRow:
    """One prompt in a `Decode`: its budget, its generator and what it sampled so far."""

    def __init__(self, prompt: list[int], max_new_tokens: int, generator) -> None:
        self.prompt = prompt
        self.max_new_tokens = max_new_tokens
        self.generator = generator
        self.length = len(prompt) - 1
        """Positions of this row held in the batch cache (its rightmost ones)."""
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.generation: Generation | None = None
        """Set when the row finishes (its stop token, or its budget)."""


class Decode:
    """A batch decode that rows join and leave between steps (continuous batching).

    `add` computes a prompt's uncached part alone (from the engine's longest cached prefix)
    and stacks its cache into the batch's: every row is right-aligned, left-padded with
    masked zeros to the batch's width, its position ids its own. `step` runs one forward
    for all live rows and samples each row's next token (its own generator when it has one,
    else the decode's). A row that samples a stop token or reaches its budget gets its
    `generation`, leaves the batch, and its cache (prompt and tokens but the last) goes to
    the engine's prefix LRU; columns that only padding still uses are dropped."""

    def __init__(self, engine: HFEngine, *, temperature: float, stop_token_ids=(), generator=None) -> None:
        engine._check_awake("decoding")
        self.engine = engine
        self.temperature = temperature
        self.stop_token_ids = tuple(stop_token_ids)
        self.generator = generator
        self.device = next(engine.model.parameters()).device
        self.rows: list[DecodeRow] = []
        self.layers: list[tuple[torch.Tensor, torch.Tensor]] = []
        """Per model layer, the batch's keys and values [B, heads, width, dim]."""
        self.attention = torch.zeros((0, 0), dtype=torch.long, device=self.device)
        self.feed: list[int] = []
        """Each live row's next input token (its last prompt token, then its last sample)."""

    @property
    def width(self) -> int:
        return self.attention.shape[1]

    @torch.no_grad()
    def add(self, prompt: list[int], max_new_tokens: int, generator=None) -> DecodeRow:
        """Join the batch with `prompt` (at least one token) and its own token budget."""
        if not prompt or max_new_tokens < 1:
            raise ValueError("a row needs a prompt of at least one token and a budget of at least one")
        engine = self.engine
        engine._check_awake("decoding")
        start, past = engine._lookup(prompt)
        engine.prompt_tokens += len(prompt)
        engine.reused_tokens += start
        body = prompt[start:-1]
        if body:  # everything but the last prompt token, which the next step feeds
            positions = torch.arange(start, len(prompt) - 1, device=self.device).unsqueeze(0)
            feed = torch.tensor([body], device=self.device)
            out = engine.model(input_ids=feed, position_ids=positions, use_cache=True, **{engine._cache_name: past})
            past = out[engine._cache_name]
        row = DecodeRow(prompt, max_new_tokens, generator)
        width = max(self.width, row.length)
        own = _layers(past) if past is not None and row.length else None
        if own is not None or self.layers:  # else nothing is cached anywhere yet (1-token prompts)
            template = own or self.layers

            def empty(rows: int, keys: torch.Tensor) -> torch.Tensor:
                return keys.new_zeros((rows, keys.shape[1], 0, keys.shape[3]))

            if not self.layers:  # the rows so far hold no positions
                self.layers = [(empty(len(self.rows), k), empty(len(self.rows), v)) for k, v in template]
            if own is None:
                own = [(empty(1, k), empty(1, v)) for k, v in self.layers]
            self.layers = [
                (
                    torch.cat([_left_pad(k, width), _left_pad(ok, width)]),
                    torch.cat([_left_pad(v, width), _left_pad(ov, width)]),
                )
                for (k, v), (ok, ov) in zip(self.layers, own, strict=True)
            ]
        attention = torch.zeros((len(self.rows) + 1, width), dtype=torch.long, device=self.device)
        attention[:-1, width - self.width :] = self.attention
        if row.length:
            attention[-1, width - row.length :] = 1
        self.attention = attention
        self.rows.append(row)
        self.feed.append(prompt[-1])
        return row

    @torch.no_grad()
    def step(self) -> list[DecodeRow]:
        """One token for every live row; returns the rows that finished (and left)."""
        if not self.rows:
            return []
        engine = self.engine
        engine._check_awake("decoding")
        attention = torch.cat(
            [self.attention, torch.ones((len(self.rows), 1), dtype=torch.long, device=self.device)], dim=-1
        )
        positions = torch.tensor([[row.length] for row in self.rows], device=self.device)
        cache = _as_cache(self.layers) if self.layers else None
        out = engine.model(
            input_ids=torch.tensor([[t] for t in self.feed], device=self.device),
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
            **{engine._cache_name: cache},
        )
        self.layers, self.attention = _layers(out[engine._cache_name]), attention
        logits = out.logits[:, -1].float().cpu()
        generators = [row.generator or self.generator for row in self.rows]
        sampled, chosen = _sample_each(logits, self.temperature, generators, engine.banned_token_ids)
        finished, keep = [], []
        for index, row in enumerate(self.rows):
            token = int(sampled[index])
            row.tokens.append(token)
            row.logprobs.append(float(chosen[index]))
            row.length += 1
            self.feed[index] = token
            stopped = token in self.stop_token_ids
            if stopped or len(row.tokens) >= row.max_new_tokens:
                row.generation = Generation(row.tokens, row.logprobs, engine.version, "stop" if stopped else "length")
                finished.append((index, row))
            else:
                keep.append(index)
        for index, row in finished:  # the row's cache: its rightmost positions
            key = tuple(row.prompt + row.tokens[:-1])
            engine._prefixes[key] = _as_cache(
                [(k[index : index + 1, :, -row.length :].clone(), v[index : index + 1, :, -row.length :].clone())
                 for k, v in self.layers]
            )  # fmt: skip
            engine._prefixes.move_to_end(key)
        while len(engine._prefixes) > engine.prefix_cache_size:
            engine._prefixes.popitem(last=False)
        if finished:
            self._keep(keep)
        return [row for _, row in finished]

    def _keep(self, indices: list[int]) -> None:
        """Drop the other rows, and the leading columns no kept row uses."""
        self.rows = [self.rows[i] for i in indices]
        self.feed = [self.feed[i] for i in indices]
        if not indices:
            self.layers, self.attention = [], torch.zeros((0, 0), dtype=torch.long, device=self.device)
            return
        select = torch.tensor(indices, device=self.device)
        unused = self.width - max(row.length for row in self.rows)
        self.attention = self.attention.index_select(0, select)[:, unused:]
        self.layers = [
            (k.index_select(0, select)[:, :, unused:], v.index_select(0, select)[:, :, unused:]) for k, v in self.layers
        ]
