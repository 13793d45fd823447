"""Everything of the vllm engine up to the vLLM call, on CPU (vLLM has no CPU build)."""

from dataclasses import dataclass

import pytest

from trainer.engines.vllm import sampling_options, to_generation


@dataclass
class Logprob:  # the shape of vllm.sequence.Logprob
    logprob: float


@dataclass
class CompletionOutput:  # the fields of vllm.outputs.CompletionOutput that we read
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str


def test_completion_becomes_a_generation_with_the_sampled_tokens_logprobs():
    # Each step's dict may hold other candidates too; the sampled id's entry is the one used.
    out = CompletionOutput([5, 9], [{5: Logprob(-0.5), 7: Logprob(-0.1)}, {9: Logprob(-2.0)}], "stop")
    generation = to_generation(out, version=3)
    assert generation.token_ids == [5, 9] and generation.logprobs == [-0.5, -2.0]
    assert generation.version == 3 and generation.finish_reason == "stop"
    assert to_generation(CompletionOutput([1], [{1: Logprob(0.0)}], "length"), 0).finish_reason == "length"


def test_missing_logprobs_are_an_error():
    with pytest.raises(ValueError, match="logprobs=0"):
        to_generation(CompletionOutput([1, 2], None, "stop"), 0)


def test_sampling_options_keep_ids_exact():
    options = sampling_options(max_new_tokens=7, temperature=0.8, stop_token_ids=(2041,), seed=1)
    assert options["logprobs"] == 0 and options["detokenize"] is False and options["stop_token_ids"] == [2041]
    assert options["max_tokens"] == 7 and options["seed"] == 1
