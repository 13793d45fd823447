"""Tree training (`learner.tree_packing`): shared prefixes computed once, losses unchanged.

The trie and its mask are checked exactly on small cases; then real tiny learners take the
same step flat and packed, for each kind of objective (a critic, group baselines, SAPO's
shared readout), the warm start and the critic's pre-training, and must agree to 1e-5."""

import pytest
import torch

from tests.trainer.test_learner import pretrain_critic
from trainer.config import AlgorithmConfig, LearnerConfig
from trainer.inference.models import ValueModel, load_policy, reserve_value_tokens
from trainer.inference.trajectory import Trajectory
from trainer.learner import Learner, token_logprobs
from trainer.learner.batching import pack_by_prefix, padded_batch, prefix_share, prepare
from trainer.learner.logprobs import batch_logits, batch_logprobs, batch_values
from trainer.learner.tree import ancestor_mask, build_prefix_tree, common_prefix, tree_tensors
from trainer.resolve import resolve_algorithm


def test_the_trie_packs_each_distinct_prefix_once_in_depth_first_order():
    tree = build_prefix_tree([[7], [1, 2, 4, 5], [1, 6], [1, 2, 3]])
    assert tree.token_ids == [1, 2, 3, 4, 5, 6, 7]
    assert tree.positions == [0, 1, 2, 2, 3, 1, 0]
    assert tree.subtree_end == [6, 5, 3, 5, 5, 6, 7]
    assert tree.index == [[6], [0, 1, 3, 4], [0, 5], [0, 1, 2]]


def test_duplicates_and_prefixes_of_other_sequences_add_no_tokens():
    tree = build_prefix_tree([[1, 2], [1, 2, 3], [1, 2], []])
    assert tree.token_ids == [1, 2, 3]
    assert tree.index == [[0, 1], [0, 1, 2], [0, 1], []]
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0


def test_each_packed_token_sees_exactly_its_ancestors():
    tree = build_prefix_tree([[1, 2, 3], [1, 2, 4, 5], [1, 6], [7]])
    mask = ancestor_mask(torch.tensor(tree.subtree_end)).int().tolist()
    assert mask == [
        [1, 0, 0, 0, 0, 0, 0],  # 1
        [1, 1, 0, 0, 0, 0, 0],  # 1 2
        [1, 1, 1, 0, 0, 0, 0],  # 1 2 3
        [1, 1, 0, 1, 0, 0, 0],  # 1 2 4: not the sibling 3
        [1, 1, 0, 1, 1, 0, 0],  # 1 2 4 5
        [1, 0, 0, 0, 0, 1, 0],  # 1 6
        [0, 0, 0, 0, 0, 0, 1],  # 7: a root of its own
    ]


def test_micro_batches_fill_the_budget_with_packed_tokens():
    sequences = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 6, 7], [9, 9, 9]]
    # costs in this order: 4, 1, 2, 3 packed tokens
    assert pack_by_prefix(sequences, budget=7) == [[0, 1, 2], [3]]
    assert pack_by_prefix(sequences, budget=2) == [[0], [1], [2], [3]]  # over budget alone
    assert prefix_share([[3], [1, 2], [1]]) == [2, 1, 0]  # one rank: everything, sorted


def episode(prompt: list[int], actions: list[list[int]], observations: list[list[int]], reward: float, name: str):
    """A trajectory alternating actions and observations after `prompt`, with made-up rollout
    logprobs (the learner's ratios then sit away from 1, so SAO's mask drops some tokens)."""
    traj = Trajectory(task_id=name.split("/")[0], reward=reward, terminated=True, trajectory_id=name)
    traj.extend(prompt, policy=False)
    generator = torch.Generator().manual_seed(len(name) * 7 + int(reward))
    for index, action in enumerate(actions):
        traj.extend(action, policy=True, logprobs=(-torch.rand(len(action), generator=generator) * 8).tolist())
        if index < len(observations):
            traj.extend(observations[index], policy=False)
    return traj


def patr_batch() -> list[Trajectory]:
    """Two tasks whose prompts share a system prefix; task a grows a tree (branches forked
    after its first turn, and one after the second), task b two independent episodes."""
    generator = torch.Generator().manual_seed(3)

    def tokens(n: int) -> list[int]:
        return torch.randint(5, 2000, (n,), generator=generator).tolist()

    system = tokens(24)
    prompt_a, prompt_b = system + tokens(6), system + tokens(9)
    first, observation = tokens(5), tokens(4)
    second, observation2 = tokens(3), tokens(3)
    batch = [
        episode(prompt_a, [first, second, tokens(4)], [observation, observation2], 1.0, "a/0"),
        episode(prompt_a, [first, second, tokens(2)], [observation, observation2], 0.0, "a/1"),
        episode(prompt_a, [first, tokens(6)], [observation], 1.0, "a/2"),
        episode(prompt_a, [first, tokens(3)], [observation], 0.0, "a/3"),
        episode(prompt_b, [tokens(7), tokens(2)], [tokens(5)], 1.0, "b/0"),
        episode(prompt_b, [tokens(4)], [], 0.0, "b/1"),
    ]
    return batch


def learner(algorithm: str, tree: bool, token_budget: int = 16384) -> Learner:
    policy = load_policy("tiny", seed=0)
    critic = None
    value_ids = None
    if algorithm == "sapo":
        value_ids = reserve_value_tokens(policy)
    else:
        critic = ValueModel.from_policy(policy)
        torch.manual_seed(1)
        torch.nn.init.normal_(critic.head.weight, std=0.1)
    optim = LearnerConfig(lr=1e-3, critic_lr=1e-3, token_budget=token_budget, tree_packing=tree)
    config = resolve_algorithm(AlgorithmConfig(name=algorithm, group_size=2 if algorithm in ("grpo", "dapo") else 1))
    return Learner(policy, critic, pad_id=0, algorithm=config, optim=optim, value_token_ids=value_ids)


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    right = dict(b.named_parameters())
    for name, tensor in a.named_parameters():
        assert torch.allclose(tensor, right[name], atol=1e-5, rtol=0), name


def test_packed_outputs_equal_the_flat_ones_row_by_row():
    batch = patr_batch()
    policy = load_policy("tiny", seed=0).eval()
    critic = ValueModel.from_policy(policy)
    torch.nn.init.normal_(critic.head.weight, std=0.1)
    flat = padded_batch(batch, 0)
    tree = build_prefix_tree([t.token_ids for t in batch])
    packed = {**flat, **tree_tensors(tree, flat["input_ids"].shape[1])}
    assert len(tree.token_ids) == 87  # 24 system + 6 + 9 prompts, 30 under a, 18 under b
    assert sum(len(t) for t in batch) == 267
    real = flat["attention_mask"].bool()
    with torch.no_grad():
        for row, traj in enumerate(batch):  # each row as if it were alone
            ids = torch.tensor([traj.token_ids])
            alone = token_logprobs(policy, ids, torch.ones_like(ids))[0]
            assert torch.allclose(batch_logprobs(policy, packed)[row, : len(traj) - 1], alone, atol=1e-5)
        assert torch.allclose(batch_values(critic, packed)[real], batch_values(critic, flat)[real], atol=1e-5)
        assert torch.allclose(batch_logits(policy, packed)[real], batch_logits(policy, flat)[real], atol=1e-5)


@pytest.mark.parametrize("algorithm", ["sao", "ppo", "grpo", "dapo", "sapo"])
def test_a_packed_step_is_the_flat_step(algorithm):
    batch = patr_batch()
    if algorithm in ("grpo", "dapo"):  # groups of two: a/0 a/1, a/2 a/3, b/0 b/1
        for index, traj in enumerate(batch):
            traj.group_id = f"g{index // 2}"
    flat, packed = learner(algorithm, tree=False), learner(algorithm, tree=True)
    flat_result, packed_result = flat.step(batch), packed.step(batch)
    for key, value in flat_result.metrics.items():
        if key == "model_tokens":
            continue
        assert packed_result.metrics[key] == pytest.approx(value, abs=1e-5), key
    for key, value in flat_result.advantages.items():
        assert packed_result.advantages[key] == pytest.approx(value, abs=1e-5), key
    assert_same_weights(flat.policy, packed.policy)
    if flat.critic is not None:
        assert_same_weights(flat.critic, packed.critic)
    assert flat_result.metrics["model_tokens"] == 6 * 49  # six rows padded to the longest
    assert packed_result.metrics["model_tokens"] == 87


def test_a_small_budget_splits_trees_into_several_packed_micro_batches():
    batch = patr_batch()
    flat, packed = learner("sao", tree=False, token_budget=60), learner("sao", tree=True, token_budget=60)
    prepared = packed.prepare(batch)
    # Task a's tree is 24 + 6 + 30 = 60 packed tokens; b/0 then costs 47 - 24 more, so b's
    # two episodes start a micro-batch of their own: 47 + 4 packed tokens.
    assert [sorted(t.trajectory_id for t in m.trajectories) for m in prepared.micro_batches] == [
        ["a/0", "a/1", "a/2", "a/3"],
        ["b/0", "b/1"],
    ]
    assert [int(m.tensors["tree_ids"].numel()) for m in prepared.micro_batches] == [60, 51]
    flat_result, packed_result = flat.step(batch), packed.step(batch)
    assert packed_result.metrics["policy_loss"] == pytest.approx(flat_result.metrics["policy_loss"], abs=1e-5)
    assert packed_result.metrics["value_loss"] == pytest.approx(flat_result.metrics["value_loss"], abs=1e-5)
    assert_same_weights(flat.policy, packed.policy)


def test_warm_start_and_critic_pretraining_are_the_same_packed():
    batch = patr_batch()
    flat, packed = learner("sao", tree=False), learner("sao", tree=True)

    def supervised(one: Learner) -> list[float]:  # not ended: the critic keeps its own backbone
        one.begin_warm_start(batch, lr=3e-3)
        return one.warm_start_steps(3)

    assert supervised(packed) == pytest.approx(supervised(flat), abs=1e-5)
    assert_same_weights(flat.policy, packed.policy)
    assert pretrain_critic(packed, batch, 2) == pytest.approx(pretrain_critic(flat, batch, 2), abs=1e-5)
    assert_same_weights(flat.critic, packed.critic)


def test_prepare_keeps_every_trajectory_once_in_tree_mode():
    batch = patr_batch()
    prepared = prepare(batch, pad_id=0, token_budget=60, tree=True)
    indices = sorted(i for m in prepared.micro_batches for i in m.indices)
    assert indices == list(range(len(batch)))
    for micro in prepared.micro_batches:
        assert [batch[i] for i in micro.indices] == micro.trajectories


@pytest.mark.slow
def test_two_tree_packed_ranks_take_the_flat_step_of_one_process(tmp_path):
    """FSDP2 on two gloo ranks, tree-packed (each rank packs its contiguous run of the sorted
    batch), against one plain process stepping the same batch flat."""
    from tests.trainer.fsdp_worker import make_learner
    from tests.trainer.test_fsdp import run_two_ranks

    sharded = torch.load(run_two_ranks(tmp_path, "tree") / "after_step.pt", weights_only=True)
    single = make_learner(tree=False)
    metrics = single.step(patr_batch()).metrics
    assert sharded["metrics"]["model_tokens"] < metrics["model_tokens"]
    for key in ("policy_loss", "value_loss", "grad_norm"):
        assert sharded["metrics"][key] == pytest.approx(metrics[key], abs=1e-5), key
    for name, tensor in single.full_policy_state().items():
        assert torch.allclose(tensor, sharded["policy"][name], atol=1e-5, rtol=0), name


@pytest.mark.parametrize(
    ("overrides", "packed"),
    [([], False), (["rollout.kind=tree"], True), (["rollout.kind=tree", "learner.tree_packing=false"], False),
     (["learner.tree_packing=true"], True)],
)  # fmt: skip
def test_tree_packing_follows_tree_rollouts_unless_set(overrides, packed):
    from trainer.build import build_learner
    from trainer.resolve import load_config

    config = load_config(None, ["model.name=tiny", *overrides])
    assert build_learner(config)[0].optim.tree_packing is packed
