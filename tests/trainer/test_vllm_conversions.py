"""Everything of the vllm engine up to the vLLM call, on CPU (vLLM has no CPU build)."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from trainer.inference.engines.vllm import sampling_options, to_generation


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


# -- SAPO: banned value tokens and the grown vocabulary ---------------------------------------
PLUS, MINUS = 2048, 2049  # the tiny model's 2048 rows, then w+ and w-


def test_sampling_options_ban_ids_with_an_exact_mask():
    import torch

    from trainer.learner import policy_logits

    options = sampling_options(
        max_new_tokens=4, temperature=0.7, stop_token_ids=(), seed=None, banned_token_ids=(MINUS, PLUS, PLUS)
    )
    assert options["logit_bias"] == {PLUS: float("-inf"), MINUS: float("-inf")}
    assert "logit_bias" not in sampling_options(max_new_tokens=4, temperature=0.7, stop_token_ids=(), seed=None)
    # What vLLM does with it (LogitBiasLogitsProcessor: logits[ids] += bias, then temperature and
    # log-softmax for processed_logprobs) is the learner's distribution with the ids banned.
    logits = torch.randn(3, PLUS + 2) * 5
    processed = logits.clone()
    ids = torch.tensor(list(options["logit_bias"]))
    processed[:, ids] += torch.tensor(list(options["logit_bias"].values()))
    engine = torch.log_softmax(processed / 0.7, dim=-1)
    learner = torch.log_softmax(policy_logits(logits, (PLUS, MINUS)) / 0.7, dim=-1)
    assert torch.equal(engine[:, :PLUS], learner[:, :PLUS]) and torch.isneginf(engine[:, PLUS:]).all()


def test_a_sampled_banned_id_is_an_error():
    out = CompletionOutput([5, PLUS], [{5: Logprob(-0.5)}, {PLUS: Logprob(-0.1)}], "length")
    with pytest.raises(RuntimeError, match=str(PLUS)):
        to_generation(out, 0, banned_token_ids=(PLUS, MINUS))


@pytest.fixture(scope="module")
def sapo_export(tmp_path_factory):
    from trainer.inference.engines.vllm import export_with_value_tokens, sapo_export_folder

    root = tmp_path_factory.mktemp("engine-models")
    return export_with_value_tokens("tiny", sapo_export_folder("tiny", seed=0, root=root), seed=0)


def test_the_grown_export_loads_with_transformers_and_records_the_value_tokens(sapo_export):
    import json

    import torch
    from transformers import AutoModelForCausalLM

    from trainer.inference.engines.vllm import recorded_value_token_ids
    from trainer.inference.models import VALUE_TOKENS, load_policy, load_tokenizer, reserve_value_tokens

    model = AutoModelForCausalLM.from_pretrained(sapo_export)
    assert model.get_input_embeddings().weight.shape[0] == PLUS + 2
    config = json.loads((sapo_export / "config.json").read_text())
    assert config["value_token_ids"] == [PLUS, MINUS] and config["vocab_size"] == PLUS + 2
    assert recorded_value_token_ids(str(sapo_export)) == (PLUS, MINUS)  # the vllm engine's default ban
    assert load_tokenizer(str(sapo_export)).convert_tokens_to_ids(list(VALUE_TOKENS)) == [PLUS, MINUS]
    # The weights the SAPO learner starts from (same loader, seed and reserved rows).
    policy = load_policy("tiny", seed=0)
    reserve_value_tokens(policy)
    for name, tensor in policy.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name


def test_the_export_folder_is_deterministic_and_reused(sapo_export):
    from trainer.inference.engines.vllm import export_with_value_tokens, sapo_export_folder

    root = sapo_export.parent
    assert sapo_export_folder("tiny", seed=0, root=root) == sapo_export
    assert sapo_export_folder("tiny", seed=1, root=root) != sapo_export  # random init: per seed
    weights = next(sapo_export.glob("*.safetensors"))
    stamp = weights.stat().st_mtime_ns
    assert export_with_value_tokens("tiny", sapo_export, seed=0) == sapo_export
    assert weights.stat().st_mtime_ns == stamp
    assert not list(root.glob("*.partial-*"))


def test_engine_model_exports_only_for_vllm_under_sapo(tmp_path, sapo_export):
    from trainer.build import engine_model
    from trainer.config import TrainConfig

    def model_for(engine, algorithm, model="tiny"):
        return engine_model(
            TrainConfig(
                run={"output_dir": str(tmp_path)},
                model={"name": model, "engine": engine},
                algorithm={"name": algorithm},
            )
        )

    assert model_for("hf", "sapo") == "tiny"  # the hf engine grows in place
    assert model_for("vllm", "sao") == "tiny"
    assert model_for("vllm", "sapo", model=str(sapo_export)) == str(sapo_export)  # has the rows
    exported = model_for("vllm", "sapo")
    assert exported.startswith(str(tmp_path / "engine-models")) and exported != str(sapo_export)
    assert (Path(exported) / "model.safetensors").read_bytes() == (sapo_export / "model.safetensors").read_bytes()


def test_a_weight_update_with_more_rows_is_refused_before_any_worker():
    from trainer.inference.engines.vllm import VLLMEngine, check_vocabulary_rows
    from trainer.inference.models import load_policy, reserve_value_tokens

    check_vocabulary_rows({"model.embed_tokens.weight": (PLUS, 64), "lm_head.weight": (PLUS, 64)}, PLUS)
    with pytest.raises(ValueError, match=r"model.embed_tokens.weight has 2050 vocabulary rows .* has 2048;.*export"):
        check_vocabulary_rows({"model.embed_tokens.weight": (PLUS + 2, 64)}, PLUS)

    class FakeLLM:  # records what would reach vLLM's workers
        def __init__(self):
            self.calls = []

        def collective_rpc(self, *args, **kwargs):
            self.calls.append(args)

        def reset_prefix_cache(self):
            self.calls.append("reset")

    engine = object.__new__(VLLMEngine)  # no vLLM here: the engine's state without its __init__
    engine.llm, engine.vocabulary_rows, engine.version = FakeLLM(), PLUS, 0
    grown = load_policy("tiny", seed=0)
    reserve_value_tokens(grown)
    with pytest.raises(ValueError, match="2050 vocabulary rows"):
        engine.load_weights(grown.state_dict(), version=1)
    assert engine.llm.calls == [] and engine.version == 0
    engine.load_weights(load_policy("tiny", seed=1).state_dict(), version=1)
    assert len(engine.llm.calls) == 2 and engine.version == 1
