"""The `gpu` tier: vLLM engine, weight updates, NCCL FSDP2 on one GPU, bf16. Run by `make gpu-check`."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run with make gpu-check)"),
]
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """The tiny model with random weights saved as a Hugging Face folder vLLM can load."""
    from trainer.inference.models import load_policy, load_tokenizer

    folder = tmp_path_factory.mktemp("tiny")
    load_policy("tiny", seed=0).save_pretrained(folder)
    load_tokenizer("tiny").save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def engine(tiny_folder):
    pytest.importorskip("vllm")
    from trainer.inference.engines.vllm import VLLMEngine

    return VLLMEngine(
        str(tiny_folder), dtype="float32", gpu_memory_utilization=0.2, max_model_len=2048, enable_sleep_mode=True
    )


def test_vllm_logprobs_match_the_learner(engine, tiny_folder):
    from transformers import AutoModelForCausalLM

    from trainer.learner import token_logprobs

    prompt = [5, 6, 7, 8]
    generation = engine.generate([prompt], max_new_tokens=16, temperature=1.0, seed=0)[0]
    model = AutoModelForCausalLM.from_pretrained(tiny_folder).cuda()
    ids = torch.tensor([prompt + generation.token_ids], device="cuda")
    scored = token_logprobs(model, ids, torch.ones_like(ids))[0, len(prompt) - 1 :].cpu()
    assert torch.allclose(scored, torch.tensor(generation.logprobs), atol=1e-3)


def test_vllm_weight_update_changes_outputs_and_version(engine):
    from trainer.inference.models import load_policy

    before = engine.generate([[5, 6, 7]], max_new_tokens=8, temperature=0.0)[0].token_ids
    engine.load_weights(load_policy("tiny", seed=1).state_dict(), version=1)
    after = engine.generate([[5, 6, 7]], max_new_tokens=8, temperature=0.0)[0]
    assert after.version == 1 and after.token_ids != before
    engine.sleep(level=1)  # weights backed up in CPU memory
    engine.wake()
    assert engine.generate([[5, 6, 7]], max_new_tokens=8, temperature=0.0)[0].token_ids == after.token_ids


def test_vllm_sleeps_and_wakes_with_the_learners_weights(engine):
    """BiDiRL's hot switch on a GPU: a level-2 sleep discards weights and KV cache; waking with
    a state loads it (any version) and generates what the engine generated with it before."""
    from trainer.inference.engines import EngineAsleepError
    from trainer.inference.models import load_policy

    state = load_policy("tiny", seed=2).state_dict()
    engine.load_weights(state, version=engine.version + 1)
    version = engine.version
    before = engine.generate([[5, 6, 7]], max_new_tokens=8, temperature=0.0)[0].token_ids
    engine.sleep()
    with pytest.raises(EngineAsleepError, match="wake"):
        engine.generate([[5, 6, 7]], max_new_tokens=8, temperature=0.0)
    engine.wake(state, version)
    after = engine.generate([[5, 6, 7]], max_new_tokens=8, temperature=0.0)[0]
    assert after.token_ids == before and after.version == version


def test_fsdp2_nccl_and_bf16_on_one_gpu(tmp_path):
    code = (
        "import torch; from trainer import distributed; from trainer.learner import Learner; "
        "from trainer.config import AlgorithmConfig, LearnerConfig; from trainer.resolve import resolve_algorithm; "
        "from trainer.inference.models import ValueModel, load_policy; from tests.trainer.fsdp_worker import fixed_batch; "
        "mesh = distributed.init_from_env(); p = load_policy('tiny', seed=0); "
        "optim = LearnerConfig(bf16=True, lr=1e-3); "
        "l = Learner(p, ValueModel.from_policy(p), pad_id=0, algorithm=resolve_algorithm(AlgorithmConfig()), optim=optim, mesh=mesh); "
        "m = l.step(fixed_batch()).metrics; assert m['version'] == 1 and m['policy_tokens'] > 0, m; print('ok', m); "
        "distributed.exit_rank()"
    )
    result = _run_snippet(tmp_path / "one_gpu_step.py", code, "-m", "torch.distributed.run", "--nproc_per_node=1",
                          "--master_port=29561")  # fmt: skip
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]


def _run_snippet(script: Path, code: str, *launcher: str) -> subprocess.CompletedProcess:
    """Run `code` (statements joined by "; ") as a script, with `python *launcher script`."""
    script.write_text(code.replace("; ", "\n"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, *launcher, str(script)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_vllm_on_a_sapo_export_never_samples_the_value_tokens(engine, tmp_path_factory):
    """SAPO: the engine is built from the grown export (as `trainer.build.engine_model` does),
    bans the recorded value tokens even when they would dominate, its logprobs are the
    learner's with those ids at -inf, and the learner's full state loads in place. An engine
    on the original vocabulary refuses that state before touching its workers."""
    pytest.importorskip("vllm")
    from trainer.inference.engines.vllm import VLLMEngine, export_with_value_tokens, sapo_export_folder
    from trainer.inference.models import load_policy, reserve_value_tokens
    from trainer.learner import token_logprobs

    folder = export_with_value_tokens("tiny", sapo_export_folder("tiny", seed=0, root=tmp_path_factory.mktemp("m")))
    banned = (2048, 2049)
    sapo = VLLMEngine(str(folder), dtype="float32", gpu_memory_utilization=0.2, max_model_len=2048)
    assert sapo.banned_token_ids == banned and sapo.vocabulary_rows == 2050

    policy = load_policy("tiny", seed=1)
    reserve_value_tokens(policy)
    with torch.no_grad():  # w+ = -w- along a random direction: unbanned, one of them wins every step
        direction = torch.nn.functional.normalize(torch.randn(policy.config.hidden_size), dim=0) * 1000
        policy.get_output_embeddings().weight[2048] = direction
        policy.get_output_embeddings().weight[2049] = -direction
    sapo.load_weights(policy.state_dict(), version=1)
    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    for generation in sapo.generate(prompts, max_new_tokens=64, temperature=1.0, seed=0):
        assert generation.version == 1 and generation.token_ids
        assert not set(generation.token_ids) & set(banned)
    generation = sapo.generate([prompts[0]], max_new_tokens=16, temperature=1.0, seed=1)[0]
    model = policy.cuda()
    ids = torch.tensor([prompts[0] + generation.token_ids], device="cuda")
    scored = token_logprobs(model, ids, torch.ones_like(ids), banned=banned)[0, len(prompts[0]) - 1 :].cpu()
    assert torch.allclose(scored, torch.tensor(generation.logprobs), atol=1e-3)

    with pytest.raises(ValueError, match="2050 vocabulary rows"):
        engine.load_weights(policy.cpu().state_dict(), version=engine.version + 1)


def test_a_one_rank_learner_group_trains_on_its_gpu(tmp_path):
    """`placement.learner_ranks=1` on a GPU machine: the learner actor makes a one-rank NCCL
    group, so the policy lives on CUDA (not on the actor's CPU, where bf16 would be ignored)."""
    code = (
        "import os, torch; from trainer.resolve import load_config; "
        "from trainer.orchestrator.learner_group import LearnerRank, timed_step; "
        "from tests.trainer.fsdp_worker import fixed_batch; from trainer import distributed; "
        "config = load_config(None, ['learner.bf16=true']).model_dump(); "
        "rank = LearnerRank(config, 0, 1, 4); rank.setup('127.0.0.1:29563'); "
        "device = next(rank.learner.policy.parameters()).device; assert device.type == 'cuda', device; "
        "m = rank.call(timed_step, fixed_batch()).metrics; assert m['version'] == 1, m; print('ok', device); "
        "distributed.exit_rank()"
    )
    result = _run_snippet(tmp_path / "one_rank_group.py", code)
    assert result.returncode == 0 and "ok cuda" in result.stdout, result.stderr[-3000:]
