import pytest
import torch

from agent_env import ToolEnv, gold_actions
from tasks import builtin_tasks
from tests.conftest import needs_bwrap
from trainer.inference.engines.hf import HFEngine
from trainer.inference.engines.scripted import ScriptedEngine
from trainer.inference.models import load_policy, load_tokenizer
from trainer.inference.rollout import ChatFormat, run_episode
from trainer.learner import token_logprobs


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


@pytest.fixture(scope="module")
def chat(tokenizer):
    return ChatFormat(tokenizer)


def test_tiny_model_is_seeded_and_offline():
    a, b = load_policy("tiny", seed=1), load_policy("tiny", seed=1)
    c = load_policy("tiny", seed=2)
    first = next(iter(a.state_dict()))
    assert torch.equal(a.state_dict()[first], b.state_dict()[first])
    assert not torch.equal(a.state_dict()[first], c.state_dict()[first])


def test_hf_engine_logprobs_match_the_learners_scoring(chat):
    model = load_policy("tiny", seed=0)
    engine = HFEngine(model)
    prompt = chat.encode("def add(a, b):\n    return")
    generation = engine.generate([prompt], max_new_tokens=12, temperature=1.0, seed=7)[0]
    assert len(generation.token_ids) == len(generation.logprobs) > 0
    ids = torch.tensor([prompt + generation.token_ids])
    scored = token_logprobs(model, ids, torch.ones_like(ids))[0, len(prompt) - 1 :]
    assert torch.allclose(scored, torch.tensor(generation.logprobs), atol=1e-5)
    again = engine.generate([prompt], max_new_tokens=12, temperature=1.0, seed=7)[0]
    assert again.token_ids == generation.token_ids  # seeded sampling is reproducible


def test_hf_engine_stops_on_stop_token_and_reports_version(chat):
    engine = HFEngine(load_policy("tiny", seed=0), version=4)
    first = engine.generate([chat.encode("x")], max_new_tokens=5, temperature=0.0)[0]
    stop = first.token_ids[2]
    out = engine.generate([chat.encode("x")], max_new_tokens=5, temperature=0.0, stop_token_ids=(stop,))[0]
    assert out.finish_reason == "stop" and out.token_ids[-1] == stop and out.version == 4
    assert first.finish_reason == "length" and len(first.token_ids) == 5


def test_multi_turn_ids_match_the_chat_template(tokenizer, chat):
    """Appending ids turn by turn yields what the template renders for the same chat."""
    system, user, reply, tool_output = "sys", "fix the bug", "<tool_call>\n{}\n</tool_call>", "ok"
    ids = chat.prompt_ids(system, user, None) + chat.encode(reply) + [chat.end_id]
    ids += chat.observation_ids(tool_output, turn_closed=True)
    rendered = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
            {"role": "assistant", "content": reply},
            {"role": "tool", "content": tool_output},
        ],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert tokenizer.decode(ids) == rendered


@needs_bwrap
def test_scripted_gold_episode_records_masks_and_reward(chat):
    task = builtin_tasks()[0]
    engine = ScriptedEngine(gold_actions(task), chat.encode, chat.end_id, version=2)
    trajectory = run_episode(ToolEnv(task), engine, chat, max_new_tokens=4096, max_total_tokens=50_000)
    assert trajectory.reward == 1.0 and trajectory.terminated and trajectory.resolved
    assert len(trajectory.turn_starts) == 2
    n = len(trajectory)
    assert len(trajectory.policy_mask) == len(trajectory.logprobs) == len(trajectory.versions) == n
    policy_versions = {v for v, m in zip(trajectory.versions, trajectory.policy_mask, strict=True) if m}
    assert policy_versions == {2}
    # The policy's tokens decode back to exactly what the script said.
    first = trajectory.turn_starts[0]
    end = trajectory.policy_mask.index(False, first)
    assert chat.decode(trajectory.token_ids[first:end]) == gold_actions(task)[0]


@needs_bwrap
def test_token_budget_truncates_the_episode(chat):
    task = builtin_tasks()[0]
    engine = HFEngine(load_policy("tiny", seed=0))
    env = ToolEnv(task, max_turns=50)
    trajectory = run_episode(
        env,
        engine,
        chat,
        max_new_tokens=16,
        max_total_tokens=len(chat.prompt_ids(env.system_prompt, "x", env.tools)) + 200,
        seed=0,
    )
    assert trajectory.truncated and not trajectory.terminated
    assert trajectory.end in ("token_limit", "max_turns")
    assert len(trajectory) <= 10_000


def test_batched_generation_matches_one_prompt_at_a_time(chat):
    model = load_policy("tiny", seed=0)
    engine = HFEngine(model)
    prompts = [chat.encode("def add(a, b):"), chat.encode("x"), chat.encode("import os\nimport sys\n")]
    batched = engine.generate(prompts, max_new_tokens=10, temperature=0.0)
    for prompt, together in zip(prompts, batched, strict=True):
        alone = engine.generate([prompt], max_new_tokens=10, temperature=0.0)[0]
        assert together.token_ids == alone.token_ids
        assert torch.allclose(torch.tensor(together.logprobs), torch.tensor(alone.logprobs), atol=1e-5)
    # Sampled batches carry the logprobs the learner computes for the same tokens.
    sampled = engine.generate(prompts, max_new_tokens=8, temperature=1.0, seed=3)
    for prompt, generation in zip(prompts, sampled, strict=True):
        ids = torch.tensor([prompt + generation.token_ids])
        scored = token_logprobs(model, ids, torch.ones_like(ids))[0, len(prompt) - 1 :]
        assert torch.allclose(scored, torch.tensor(generation.logprobs), atol=1e-5)


def test_rows_stop_independently(chat):
    engine = HFEngine(load_policy("tiny", seed=0))
    prompts = [chat.encode("a"), chat.encode("b c d")]
    free = engine.generate(prompts, max_new_tokens=6, temperature=0.0)
    stop = free[0].token_ids[1]
    out = engine.generate(prompts, max_new_tokens=6, temperature=0.0, stop_token_ids=(stop,))
    for row in range(2):
        expected = free[row].token_ids
        if stop in expected:
            expected = expected[: expected.index(stop) + 1]
        assert out[row].token_ids == expected
        assert out[row].finish_reason == ("stop" if stop in expected else "length")
    assert out[0].finish_reason == "stop"


def test_next_turn_reuses_the_prefix_kv_cache(chat):
    model = load_policy("tiny", seed=0)
    engine = HFEngine(model)
    prompt = chat.encode("def add(a, b):\n")
    first = engine.generate([prompt], max_new_tokens=6, temperature=1.0, seed=1)[0]
    assert engine.reused_tokens == 0
    second_prompt = prompt + first.token_ids + chat.encode("\nobservation\n")
    second = engine.generate([second_prompt], max_new_tokens=6, temperature=1.0, seed=2)[0]
    assert engine.reused_tokens == len(prompt) + len(first.token_ids) - 1
    # Reused keys and values give the logprobs a full recomputation gives.
    ids = torch.tensor([second_prompt + second.token_ids])
    scored = token_logprobs(model, ids, torch.ones_like(ids))[0, len(second_prompt) - 1 :]
    assert torch.allclose(scored, torch.tensor(second.logprobs), atol=1e-5)
    # Branches forked after that turn each start from its cache.
    reused = engine.reused_tokens
    branch_point = second_prompt + second.token_ids
    engine.generate([branch_point + [5]], max_new_tokens=2, temperature=1.0, seed=3)
    engine.generate([branch_point + [6]], max_new_tokens=2, temperature=1.0, seed=4)
    assert engine.reused_tokens == reused + 2 * (len(branch_point) - 1)
    # New weights make every cached key and value stale.
    engine.load_weights(load_policy("tiny", seed=9).state_dict(), version=1)
    before = engine.reused_tokens
    engine.generate([second_prompt + [7]], max_new_tokens=1)
    assert engine.reused_tokens == before
