import pytest
import torch

from trainer.inference.models import ValueModel, load_policy, reserve_value_tokens
from trainer.inference.trajectory import Trajectory
from trainer.learner import CheckpointError, NonFiniteError, SAOLearner, token_logprobs


def make_trajectory(policy, reward: float, seed: int) -> Trajectory:
    torch.manual_seed(seed)
    prompt = torch.randint(5, 200, (6,)).tolist()
    action = torch.randint(5, 200, (5,)).tolist()
    obs = torch.randint(5, 200, (3,)).tolist()
    action2 = torch.randint(5, 200, (4,)).tolist()
    ids = torch.tensor([prompt + action + obs + action2])
    with torch.no_grad():
        logp = token_logprobs(policy, ids, torch.ones_like(ids))[0].tolist()
    traj = Trajectory(task_id=f"t{seed}", reward=reward, terminated=True)
    traj.extend(prompt, policy=False)
    start = len(prompt)
    traj.extend(action, policy=True, logprobs=logp[start - 1 : start - 1 + len(action)], version=0)
    traj.extend(obs, policy=False)
    start = len(traj)
    traj.extend(action2, policy=True, logprobs=logp[start - 1 : start - 1 + len(action2)], version=0)
    return traj


@pytest.fixture
def learner():
    policy = load_policy("tiny", seed=0)
    return SAOLearner(policy, ValueModel.from_policy(policy), pad_id=0, lr=1e-3, critic_lr=1e-3)


def test_step_updates_policy_and_critic_and_bumps_version(learner):
    trajectories = [make_trajectory(learner.policy, r, s) for s, r in enumerate([1.0, 0.0, 1.0])]
    before_policy = [p.detach().clone() for p in learner.policy.parameters()]
    before_head = learner.critic.head.weight.detach().clone()
    metrics = learner.step(trajectories)
    assert metrics["version"] == 1 == learner.version
    assert metrics["policy_tokens"] == 27
    # On-policy data: every ratio is 1, nothing is masked.
    assert metrics["masked_low_fraction"] == 0 and metrics["masked_high_fraction"] == 0
    assert abs(metrics["mean_ratio"] - 1) < 1e-4
    assert any(not torch.equal(a, b) for a, b in zip(before_policy, learner.policy.parameters(), strict=True))
    assert not torch.equal(before_head, learner.critic.head.weight)


def test_critic_learns_returns(learner):
    trajectories = [make_trajectory(learner.policy, 1.0, s) for s in range(2)]
    losses = [learner.step(trajectories)["value_loss"] for _ in range(15)]
    assert losses[-1] < losses[0] * 0.5


def test_advantages_are_zero_off_policy_tokens(learner):
    from trainer.learner import _batch

    trajectories = [make_trajectory(learner.policy, 1.0, 0)]
    batch = _batch(trajectories, 0)
    advantages, returns, _ = learner.advantages(trajectories, batch)
    off = ~batch["policy_mask"]
    assert advantages[off].abs().sum() == 0 and returns[off].abs().sum() == 0
    # lambda = 1 for the critic and gamma = 1: every return is the final reward.
    assert torch.allclose(returns[batch["policy_mask"]], torch.ones(9))


def test_checkpoint_round_trip_and_corrupt_checkpoint(learner, tmp_path):
    learner.step([make_trajectory(learner.policy, 1.0, 0)])
    path = learner.save(tmp_path / "ckpt", extra={"step": 1})
    policy = load_policy("tiny", seed=99)
    other = SAOLearner(policy, ValueModel.from_policy(policy), pad_id=0)
    state = other.load(path)
    assert state["step"] == 1 and other.version == 1
    for a, b in zip(learner.policy.state_dict().values(), other.policy.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    # The exported policy folder loads with plain transformers.
    from transformers import AutoModelForCausalLM

    exported = AutoModelForCausalLM.from_pretrained(path / "policy")
    ids = torch.tensor([[5, 6, 7]])
    assert torch.allclose(exported(ids).logits, learner.policy(ids).logits, atol=1e-6)
    for shard in (path / "dcp").glob("*.distcp"):
        shard.write_bytes(shard.read_bytes()[:100])  # a torn write
    with pytest.raises(CheckpointError, match="ckpt"):
        other.load(path)
    with pytest.raises(CheckpointError, match="missing"):
        other.load(tmp_path / "missing")


def test_non_finite_steps_are_skipped_counted_and_abort_after_k(learner):
    learner.max_bad_steps = 2
    poisoned = [make_trajectory(learner.policy, float("nan"), 0)]
    before = [p.detach().clone() for p in learner.policy.parameters()]
    metrics = learner.step(poisoned)
    assert metrics["skipped_steps"] == 1 and learner.version == 0
    assert all(torch.equal(a, b) for a, b in zip(before, learner.policy.parameters(), strict=True))
    learner.step([make_trajectory(learner.policy, 1.0, 1)])  # a good step resets the streak
    assert learner.version == 1
    learner.step(poisoned)
    with pytest.raises(NonFiniteError, match="2 learner steps in a row"):
        learner.step(poisoned)


def test_activation_checkpointing_gives_the_same_step():
    def run(checkpointing: bool):
        policy = load_policy("tiny", seed=0)
        learner = SAOLearner(
            policy, ValueModel.from_policy(policy), pad_id=0, lr=1e-3, activation_checkpointing=checkpointing
        )
        learner.step([make_trajectory(load_policy("tiny", seed=0), 1.0, s) for s in range(2)])
        return learner.full_policy_state()

    plain, checkpointed = run(False), run(True)
    for name, tensor in plain.items():
        assert torch.allclose(tensor, checkpointed[name], atol=1e-6), name


def saved_activation_bytes(learner: SAOLearner) -> int:
    total = 0

    def pack(tensor):
        nonlocal total
        total += tensor.numel() * tensor.element_size()
        return tensor

    ids = torch.randint(5, 200, (2, 256))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        token_logprobs(learner.policy, ids, torch.ones_like(ids)).sum()
    return total


def test_activation_checkpointing_saves_memory():
    def learner(checkpointing: bool) -> SAOLearner:
        policy = load_policy("tiny", seed=0)
        return SAOLearner(policy, ValueModel.from_policy(policy), pad_id=0, activation_checkpointing=checkpointing)

    assert saved_activation_bytes(learner(True)) < 0.7 * saved_activation_bytes(learner(False))


def test_value_pretraining_moves_only_the_critic(learner):
    trajectories = [make_trajectory(learner.policy, 1.0, s) for s in range(2)]
    before = [p.detach().clone() for p in learner.policy.parameters()]
    losses = learner.pretrain_critic(trajectories, steps=10)
    assert losses[-1] < losses[0]
    assert all(torch.equal(a, b) for a, b in zip(before, learner.policy.parameters(), strict=True))
    assert learner.version == 0


@pytest.mark.parametrize("algorithm", ["sao", "ppo", "decoupled_ppo", "grpo", "dr_grpo", "dapo", "sapo"])
def test_every_algorithm_is_selectable_by_name_and_trains(algorithm):
    policy = load_policy("tiny", seed=0)
    critic = ValueModel.from_policy(policy)
    if algorithm == "sapo":  # one model: the value is read through two reserved vocabulary rows
        reserve_value_tokens(policy)
    learner = SAOLearner(policy, critic, pad_id=0, lr=1e-3, algorithm=algorithm)
    assert (learner.critic is None) == (algorithm in ("grpo", "dr_grpo", "dapo", "sapo"))
    trajectories = [make_trajectory(load_policy("tiny", seed=3), r, s) for s, r in enumerate([1.0, 0.0, 0.0, 1.0])]
    for traj in trajectories:
        traj.group_id = "g"  # one group of four
    before = [p.detach().clone() for p in learner.policy.parameters()]
    metrics = learner.step(trajectories)
    assert metrics["version"] == 1 and metrics["policy_tokens"] == 36
    assert any(not torch.equal(a, b) for a, b in zip(before, learner.policy.parameters(), strict=True))


def test_group_advantages_are_normalised_within_each_group():
    policy = load_policy("tiny", seed=0)
    learner = SAOLearner(policy, None, pad_id=0, algorithm="grpo")
    trajectories = [make_trajectory(policy, r, s) for s, r in enumerate([1.0, 0.0, 5.0, 5.0])]
    for traj, group in zip(trajectories, ["a", "a", "b", "b"], strict=True):
        traj.group_id = group
    learner._group_advantages(trajectories)
    from trainer.learner import _batch

    batch = _batch(trajectories, 0)
    advantages, _, _ = learner.advantages(trajectories, batch)
    per_row = [advantages[row][batch["policy_mask"][row]].unique().tolist() for row in range(4)]
    assert per_row[0][0] > 0 > per_row[1][0]  # the better rollout of group a is pushed up
    assert per_row[2] == [0.0] and per_row[3] == [0.0]  # equal rewards: no signal
    assert advantages[~batch["policy_mask"]].abs().sum() == 0


def test_dapo_drops_zero_variance_groups():
    policy = load_policy("tiny", seed=0)
    learner = SAOLearner(policy, None, pad_id=0, algorithm="dapo", lr=1e-3)
    same = [make_trajectory(policy, 1.0, s) for s in range(2)]
    assert learner.step(same) == {"zero_variance_dropped": 2, "version": 0, "skipped_steps": 0}
    mixed = [make_trajectory(policy, r, s) for s, r in enumerate([1.0, 0.0])]
    for traj in mixed:
        traj.group_id = "other"
    metrics = learner.step(same + mixed)
    assert metrics["zero_variance_dropped"] == 2 and metrics["policy_tokens"] == 18 and learner.version == 1


def test_unknown_algorithm_and_missing_critic_are_clear_errors():
    policy = load_policy("tiny", seed=0)
    with pytest.raises(ValueError, match="unknown algorithm 'reinforce'"):
        SAOLearner(policy, None, pad_id=0, algorithm="reinforce")
    with pytest.raises(ValueError, match="needs a critic"):
        SAOLearner(policy, None, pad_id=0, algorithm="ppo")


def test_frozen_critic_attention_stays_put(learner):
    policy = load_policy("tiny", seed=0)
    learner = SAOLearner(policy, ValueModel.from_policy(policy), pad_id=0, critic_lr=1e-2, freeze_critic_attention=True)
    attention = {n: p.detach().clone() for n, p in learner.critic.named_parameters() if "self_attn" in n}
    assert attention
    learner.step([make_trajectory(policy, 1.0, s) for s in range(2)])
    for name, param in learner.critic.named_parameters():
        if name in attention:
            assert torch.equal(param, attention[name]), name


def test_warm_start_restarts_the_critic_from_the_fine_tuned_policy(learner):
    """SAO initialises the critic from the (fine-tuned) policy: after a warm start the
    critic's backbone equals the policy's decoder, not the random initialisation."""
    head = learner.critic.head.weight.detach().clone()
    learner.warm_start([make_trajectory(learner.policy, 1.0, seed=3)], steps=2, lr=1e-2)
    decoder = dict(learner.policy.get_decoder().named_parameters())
    for name, parameter in learner.critic.backbone.named_parameters():
        assert torch.equal(parameter, decoder[name]), name
    assert torch.equal(learner.critic.head.weight, head)
    assert not learner.critic_optimizer.state  # a fresh optimizer
