"""The `vllm` engine: vLLM's offline engine in this process (or in a Ray actor), on a GPU.

- Token ids in (`TokensPrompt`), token ids and the sampled tokens' logprobs out; vLLM is
  asked for `processed_logprobs`, i.e. after temperature and the banned-token mask, which
  is the distribution the learner's importance ratio compares against.
- Banned tokens: SAPO's value readout rows (w+ and w-, `trainer.inference.models.reserve_value_tokens`)
  are never sampled. The engine bans the ids it is given, else those its model folder's
  `config.json` records (`value_token_ids`, as in a SAPO export), with a logit bias of -inf
  (`sampling_options`): vLLM adds it before it samples and before it computes the processed
  logprobs, so those are the learner's distribution with the same ids at -inf.
- Grown vocabulary: vLLM cannot resize its embedding in place, so a SAPO run builds this
  engine from an export of the grown policy (`export_with_value_tokens`; `trainer.build`
  does it for `algorithm=sapo`); the learner's full state then loads with the same shapes.
  An update with more vocabulary rows than the engine's model is refused before any worker
  is touched (`check_vocabulary_rows`), with the fix in the message.
- Prefix caching is on, so multi-turn prompts and tree branches reuse shared prefixes.
- Sleep mode (`sleep()` / `wake(state_dict, version)`, the hf engine's names) frees the GPU
  for a learner rank (BiDiRL's hot switch, arXiv 2607.09207); built with
  `enable_sleep_mode=True` only when asked (`make_engine(..., sleep_mode=True)`), since
  vLLM's sleep-mode allocator must be chosen at construction.
- Weight updates arrive as the learner's versioned, checksummed buckets
  (`trainer.inference.engines.weights`); every worker verifies and loads them through
  `WeightUpdateExtension` (vLLM's `worker_extension_cls` hook), then the prefix cache is
  reset, since cached keys and values belong to the old weights.

vLLM has no CPU build: this module imports it lazily, its conversions, checks and the
export are plain functions tested on CPU, and the engine itself is tested by the `gpu`
tier (`make gpu-check`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer.inference.engines.base import Generation
from trainer.inference.engines.weights import WeightBucket, assemble

VOCABULARY_PARAMETERS = ("embed_tokens.weight", "lm_head.weight", "lm_head.bias", "wte.weight", "embed_out.weight")
"""Name endings of the parameters with one row per vocabulary id (Hugging Face names)."""


def sampling_options(
    *,
    max_new_tokens: int,
    temperature: float,
    stop_token_ids: Sequence[int],
    seed: int | None,
    banned_token_ids: Sequence[int] = (),
) -> dict[str, Any]:
    """Keyword arguments for `vllm.SamplingParams` that keep token ids exact and never
    sample `banned_token_ids`."""
    options = {
        "max_tokens": max_new_tokens,
        "temperature": temperature,
        "stop_token_ids": list(stop_token_ids),
        "logprobs": 0,  # the sampled token's own logprob only
        "seed": seed,
        "detokenize": False,  # ids are the output; text would be re-derived by callers anyway
        "skip_special_tokens": False,
        "include_stop_str_in_output": True,
    }
    if banned_token_ids:
        # A logit bias of -inf is an exact mask (x + -inf = -inf), applied before the processed
        # logprobs are computed. vLLM v1 (vllm/v1/sample/sampler.py, `Sampler.forward`) runs
        # `apply_logits_processors` (allowed ids, bad words, then the non-argmax-invariant
        # processors, among them `LogitBiasLogitsProcessor` of
        # vllm/v1/sample/logits_processor/builtin.py: `logits[slice] += bias`) and only then
        # `sample()`, which returns the `processed_logprobs`; the newer model runner
        # (vllm/v1/worker/gpu/sample/sampler.py) likewise applies `LogitBiasState` first and
        # takes logprobs of the processed logits. The +-100 clamp exists only in
        # `SamplingParams.from_optional` (the OpenAI server's path), not in the constructor, and
        # `_validate_logit_bias` checks only that ids are below the model's vocabulary size (vLLM
        # refuses logit_bias with speculative decoding, which this engine does not use).
        # Not chosen: `allowed_token_ids` (an exact mask too, but it lists every other id:
        # some releases validate it against len(tokenizer), which leaves out padded rows; capped at 1024
        # ids in vllm/v1/worker/gpu/sample/logit_bias.py); `bad_words` (strings, tokenized:
        # the value rows may have no text); a custom logits processor (engine-wide class,
        # an interface that changed between releases).
        options["logit_bias"] = {int(i): float("-inf") for i in sorted(set(banned_token_ids))}
    return options


def to_generation(completion: Any, version: int, banned_token_ids: Sequence[int] = ()) -> Generation:
    """A vLLM `CompletionOutput` as a `Generation`: ids and the logprob of each sampled id."""
    ids = list(completion.token_ids)
    if completion.logprobs is None or len(completion.logprobs) != len(ids):
        raise ValueError("vLLM returned no per-token logprobs; SamplingParams(logprobs=0) is required")
    sampled_banned = sorted(set(ids) & set(banned_token_ids))
    if sampled_banned:
        raise RuntimeError(
            f"vLLM sampled banned token ids {sampled_banned}: its logit_bias of -inf was not applied "
            "(does this vLLM clamp logit_bias?); the learner gives these ids no probability"
        )
    logprobs = [float(step[token].logprob) for step, token in zip(completion.logprobs, ids, strict=True)]
    finish = "stop" if completion.finish_reason == "stop" else "length"
    return Generation(ids, logprobs, version, finish)


def recorded_value_token_ids(model: str) -> tuple[int, ...]:
    """The `value_token_ids` that the `config.json` of model folder `model` records (a SAPO
    export), else ()."""
    config = Path(model) / "config.json"
    if not config.is_file():
        return ()
    return tuple(int(i) for i in json.loads(config.read_text()).get("value_token_ids") or ())


def check_vocabulary_rows(shapes: Mapping[str, Sequence[int]], rows: int) -> None:
    """Refuse a weight update whose vocabulary parameters have more rows than the engine's
    model (`rows`): vLLM cannot grow its embedding, and its loaders fail inside the workers."""
    for name, shape in shapes.items():
        if name.endswith(VOCABULARY_PARAMETERS) and len(shape) and shape[0] > rows:
            raise ValueError(
                f"weight update: {name} has {shape[0]} vocabulary rows but the vLLM engine's model has "
                f"{rows}; vLLM cannot add rows in place. A SAPO policy has 2 more rows (its value tokens, "
                "trainer.inference.models.reserve_value_tokens): build the engine from an export of the grown "
                "policy (trainer.build.engine_model does it for algorithm=sapo; or "
                "trainer.inference.engines.vllm.export_with_value_tokens)"
            )


def _has_weights(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))


def sapo_export_folder(model: str, *, seed: int, root: str | Path) -> Path:
    """Where `export_with_value_tokens` puts `model`'s grown export under `root`: one folder
    per checkpoint (a folder's files, names, sizes and times; a hub name as is) and, for a
    folder without weights (randomly initialised, like `tiny`), per seed."""
    from trainer.inference.models import resolve_model_path

    path = Path(resolve_model_path(model))
    if path.is_dir():
        files = sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in path.iterdir() if f.is_file())
        key: dict[str, Any] = {"model": str(path.resolve()), "files": files}
        if not _has_weights(path):
            key["seed"] = seed
    else:
        key = {"model": model}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return Path(root) / f"{path.name or 'model'}-sapo-{digest}"


def export_with_value_tokens(model: str, folder: str | Path, *, seed: int = 0) -> Path:
    """`model` with SAPO's two value rows (`trainer.inference.models.reserve_value_tokens`), saved as a
    Hugging Face folder (model, tokenizer, `value_token_ids` in its config) that vLLM can
    serve; reused when `folder` already holds one. Weights as `trainer.build.build_learner`
    starts from them (same loader and seed), in the checkpoint's own dtype."""
    import torch

    from trainer.inference.manifest import write_manifest
    from trainer.inference.models import load_policy, load_tokenizer, reserve_value_tokens, resolve_model_path

    folder = Path(folder)
    if recorded_value_token_ids(str(folder)) and _has_weights(folder):
        return folder
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(resolve_model_path(model))
    saved = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    saved = getattr(torch, saved, None) if isinstance(saved, str) else saved
    dtype = saved if saved in (torch.float16, torch.bfloat16) else torch.float32
    policy = load_policy(model, seed=seed, dtype=dtype)
    tokenizer = load_tokenizer(model)
    reserve_value_tokens(policy, tokenizer)
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    policy.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    write_manifest(partial)  # the export verifies itself when loaded
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        partial.rename(folder)  # atomic: a reader sees a complete export or none
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)  # another process finished it first
        if not recorded_value_token_ids(str(folder)):
            raise
    return folder


class WeightUpdateExtension:
    """Mixed into vLLM's workers (`worker_extension_cls`): verify and load a weight update."""

    def update_weights_from_buckets(self, buckets: list[WeightBucket]) -> int:
        version, state = assemble(buckets)
        device = next(self.model_runner.model.parameters()).device
        self.model_runner.model.load_weights(weights=[(name, tensor.to(device)) for name, tensor in state.items()])
        return version


class VLLMEngine:
    def __init__(
        self,
        model: str,
        *,
        gpu_memory_utilization: float = 0.5,
        enable_sleep_mode: bool = False,
        dtype: str = "bfloat16",
        max_model_len: int | None = None,
        version: int = 0,
        banned_token_ids: Sequence[int] | None = None,
    ) -> None:
        from vllm import LLM

        if banned_token_ids is None:  # default: what the checkpoint records (SAPO's value tokens)
            banned_token_ids = recorded_value_token_ids(model)
        self.banned_token_ids: tuple[int, ...] = tuple(sorted({int(i) for i in banned_token_ids}))
        """Token ids this engine never samples."""
        self.llm = LLM(
            model=model,
            dtype=dtype,
            enable_prefix_caching=True,
            enable_sleep_mode=enable_sleep_mode,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            logprobs_mode="processed_logprobs",
            worker_extension_cls=f"{__name__}.WeightUpdateExtension",
        )
        self.sleep_mode = enable_sleep_mode
        self.asleep = False
        self._sleep_level = 0
        self.vocabulary_rows = self._vocabulary_rows(model)
        """Rows of the served model's embedding (the logits' width)."""
        outside = [i for i in self.banned_token_ids if not 0 <= i < self.vocabulary_rows]
        if outside:
            raise ValueError(f"banned token ids {outside} are outside the model's {self.vocabulary_rows} rows")
        self.version = version

    def _vocabulary_rows(self, model: str) -> int:
        try:
            return int(self.llm.llm_engine.model_config.get_vocab_size())
        except AttributeError:  # a vLLM without that attribute path: the checkpoint's config
            from transformers import AutoConfig

            return int(AutoConfig.from_pretrained(model).get_text_config().vocab_size)

    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        stop_token_ids: tuple[int, ...] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if self.asleep:
            from trainer.inference.engines.base import EngineAsleepError

            raise EngineAsleepError("the vLLM engine is asleep: call wake(state_dict, version) before generating")
        params = [
            SamplingParams(
                **sampling_options(
                    max_new_tokens=max_new_tokens,
                    temperature=temperature,
                    stop_token_ids=stop_token_ids,
                    seed=None if seed is None else seed + i,
                    banned_token_ids=self.banned_token_ids,
                )
            )
            for i in range(len(prompts))
        ]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        return [to_generation(output.outputs[0], self.version, self.banned_token_ids) for output in outputs]

    def update_weights(self, buckets: list[WeightBucket], *, newer_only: bool = True) -> None:
        """Verify here too (fail before touching any worker), then load in every worker.
        `newer_only=False` (waking): any version, the engine holds no weights to compare."""
        version, state = assemble(buckets, current_version=self.version if newer_only else None)
        check_vocabulary_rows({name: tuple(tensor.shape) for name, tensor in state.items()}, self.vocabulary_rows)
        self.llm.collective_rpc("update_weights_from_buckets", args=(buckets,))
        self.llm.reset_prefix_cache()
        self.version = version

    def load_weights(self, state_dict, version: int) -> None:
        from trainer.inference.engines.weights import make_buckets

        self.update_weights(make_buckets(state_dict, version))

    # -- sleep and wake (BiDiRL's hot switch; the hf engine's names) -------------------------
    def sleep(self, level: int = 2) -> int:
        """Release the GPU for a learner rank: vLLM's sleep mode discards the KV cache and, at
        level 2, the weights too (level 1 backs them up in CPU memory). Level 2 by default:
        `wake` always brings the learner's newer weights, so a CPU copy of the old ones would
        be wasted. Returns 0 (vLLM logs the bytes it freed). Needs `enable_sleep_mode=True`."""
        if not self.sleep_mode:
            raise RuntimeError(
                "this vLLM engine was built without sleep mode: build it with enable_sleep_mode=True "
                "(make_engine(..., sleep_mode=True))"
            )
        self.llm.sleep(level=level)
        self.asleep, self._sleep_level = True, level
        return 0

    def wake(self, state_dict=None, version: int | None = None) -> None:
        """Allocate the weights again, load `state_dict` as `version` (any version), then
        the KV cache: weights first, so an update never meets a full KV cache (vLLM's
        `wake_up(tags=...)`). Without `state_dict` (after a level-1 sleep) the old weights
        come back from CPU memory."""
        if state_dict is None:
            if self._sleep_level == 2:
                raise RuntimeError(
                    "a level-2 sleep discarded the weights: wake(state_dict, version) with the learner's"
                )
            self.llm.wake_up()
        else:
            from trainer.inference.engines.weights import make_buckets

            self.llm.wake_up(tags=["weights"])
            self.update_weights(make_buckets(state_dict, version), newer_only=False)
            self.llm.wake_up(tags=["kv_cache"])
        self.llm.reset_prefix_cache()  # cached blocks of the old weights must not be reused
        self.asleep = False
