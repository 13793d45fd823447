"""The `vllm` engine: vLLM's offline engine in this process (or in a Ray actor), on a GPU.

- Token ids in (`TokensPrompt`), token ids and the sampled tokens' logprobs out; vLLM is
  asked for `processed_logprobs`, i.e. after temperature, which is the distribution the
  learner's importance ratio compares against.
- Prefix caching is on, so multi-turn prompts and tree branches reuse shared prefixes.
- Sleep mode (`sleep()` / `wake_up()`) frees GPU memory for a colocated learner.
- Weight updates arrive as the learner's versioned, checksummed buckets
  (`trainer.engines.weights`); every worker verifies and loads them through
  `WeightUpdateExtension` (vLLM's `worker_extension_cls` hook), then the prefix cache is
  reset, since cached keys and values belong to the old weights.

vLLM has no CPU build: this module imports it lazily, its conversions are plain functions
tested on CPU, and the engine itself is tested by the `gpu` tier (`make gpu-check`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainer.engines.base import Generation
from trainer.engines.weights import WeightBucket, assemble


def sampling_options(
    *, max_new_tokens: int, temperature: float, stop_token_ids: Sequence[int], seed: int | None
) -> dict[str, Any]:
    """Keyword arguments for `vllm.SamplingParams` that keep token ids exact."""
    return {
        "max_tokens": max_new_tokens,
        "temperature": temperature,
        "stop_token_ids": list(stop_token_ids),
        "logprobs": 0,  # the sampled token's own logprob only
        "seed": seed,
        "detokenize": False,  # ids are the output; text would be re-derived by callers anyway
        "skip_special_tokens": False,
        "include_stop_str_in_output": True,
    }


def to_generation(completion: Any, version: int) -> Generation:
    """A vLLM `CompletionOutput` as a `Generation`: ids and the logprob of each sampled id."""
    ids = list(completion.token_ids)
    if completion.logprobs is None or len(completion.logprobs) != len(ids):
        raise ValueError("vLLM returned no per-token logprobs; SamplingParams(logprobs=0) is required")
    logprobs = [float(step[token].logprob) for step, token in zip(completion.logprobs, ids, strict=True)]
    finish = "stop" if completion.finish_reason == "stop" else "length"
    return Generation(ids, logprobs, version, finish)


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
        enable_sleep_mode: bool = True,
        dtype: str = "bfloat16",
        max_model_len: int | None = None,
        version: int = 0,
    ) -> None:
        from vllm import LLM

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
        self.version = version

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

        params = [
            SamplingParams(
                **sampling_options(
                    max_new_tokens=max_new_tokens,
                    temperature=temperature,
                    stop_token_ids=stop_token_ids,
                    seed=None if seed is None else seed + i,
                )
            )
            for i in range(len(prompts))
        ]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        return [to_generation(output.outputs[0], self.version) for output in outputs]

    def update_weights(self, buckets: list[WeightBucket]) -> None:
        # Verify here too: fail before touching any worker.
        version = assemble(buckets, current_version=self.version)[0]
        self.llm.collective_rpc("update_weights_from_buckets", args=(buckets,))
        self.llm.reset_prefix_cache()
        self.version = version

    def load_weights(self, state_dict, version: int) -> None:
        from trainer.engines.weights import make_buckets

        self.update_weights(make_buckets(state_dict, version))

    def sleep(self, level: int = 1) -> None:
        """Release GPU memory (level 1 keeps weights in CPU memory) for a colocated learner."""
        self.llm.sleep(level=level)

    def wake_up(self) -> None:
        self.llm.wake_up()
