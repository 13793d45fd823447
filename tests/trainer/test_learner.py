import pytest
import torch
from pydantic import ValidationError

from trainer.config import AlgorithmConfig, LearnerConfig
from trainer.inference.models import ValueModel, load_policy, reserve_value_tokens
from trainer.inference.trajectory import Trajectory
from trainer.learner import CheckpointError, Learner, NonFiniteError, token_logprobs
from trainer.resolve import resolve_algorithm


def make_learner(policy, critic, algorithm: str = "sao", **optim) -> Learner:
    """A learner with `algorithm`'s defaults and `optim` as `LearnerConfig` fields."""
    return Learner(
        policy,
        critic,
        pad_id=0,
        algorithm=resolve_algorithm(AlgorithmConfig(name=algorithm)),
        optim=LearnerConfig(**optim),
    )


def make_trajectory(policy, reward: float, seed: int) -> Trajectory:
    torch.manual_seed(seed)
    prompt = torch.randint(5, 200, (6,)).tolist()
    action = torch.randint(5, 200, (5,)).tolist()
    obs = torch.randint(5, 200, (3,)).tolist()
    action2 = torch.randint(5, 200, (4,)).tolist()
    ids = torch.tensor([prompt + action + obs + action2])
    with torch.no_grad():
        logp = token_logprobs(policy, ids, torch.ones_like(ids))[0].tolist()
    traj = Trajectory(task_id=f"t{seed}", reward=reward, terminated=True, trajectory_id=f"j{seed}")
    traj.extend(prompt, policy=False)
    start = len(prompt)
    traj.extend(action, policy=True, logprobs=logp[start - 1 : start - 1 + len(action)], version=0)
    traj.extend(obs, policy=False)
    start = len(traj)
    traj.extend(action2, policy=True, logprobs=logp[start - 1 : start - 1 + len(action2)], version=0)
    return traj


def warm_start(learner: Learner, demonstrations: list[Trajectory], steps: int, lr: float) -> list[float]:
    """A whole warm start in one chunk: begin, `steps` steps, end."""
    learner.begin_warm_start(demonstrations, lr)
    losses = learner.warm_start_steps(steps)
    learner.end_warm_start()
    return losses


def pretrain_critic(learner: Learner, trajectories: list[Trajectory], steps: int) -> list[float]:
    """A whole critic pre-training in one chunk: begin, `steps` updates, end."""
    learner.begin_critic_pretraining(trajectories)
    losses = learner.critic_pretraining_steps(steps)
    learner.end_critic_pretraining()
    return losses


@pytest.fixture
def learner():
    policy = load_policy("tiny", seed=0)
    return make_learner(policy, ValueModel.from_policy(policy), lr=1e-3, critic_lr=1e-3)


def test_step_updates_policy_and_critic_and_bumps_version(learner):
    trajectories = [make_trajectory(learner.policy, r, s) for s, r in enumerate([1.0, 0.0, 1.0])]
    before_policy = [p.detach().clone() for p in learner.policy.parameters()]
    before_head = learner.critic.head.weight.detach().clone()
    result = learner.step(trajectories)
    metrics = result.metrics
    assert metrics["version"] == 1 == learner.version
    assert metrics["policy_tokens"] == 27
    # On-policy data: every ratio is 1, nothing is masked.
    assert metrics["masked_low_fraction"] == 0 and metrics["masked_high_fraction"] == 0
    assert abs(metrics["mean_ratio"] - 1) < 1e-4
    assert any(not torch.equal(a, b) for a, b in zip(before_policy, learner.policy.parameters(), strict=True))
    assert not torch.equal(before_head, learner.critic.head.weight)
    # Every trajectory's mean advantage, by id: what curricula read learnability from.
    assert set(result.advantages) == {"j0", "j1", "j2"}
    # The value head starts at zero (V = 0): a rewarded trajectory's advantage is positive,
    # an unrewarded one's is 0.
    assert result.advantages["j0"] > 0 and result.advantages["j2"] > 0 and result.advantages["j1"] == 0.0


def test_critic_learns_returns(learner):
    """Critic-only updates (the policy is not needed to test the value regression): the
    value loss toward the Monte Carlo returns (all 1) falls far below where it started."""
    trajectories = [make_trajectory(learner.policy, 1.0, s) for s in range(2)]
    losses = pretrain_critic(learner, trajectories, steps=15)
    assert losses[0] == 0.5  # the value head starts at zero: 0.5 * (1 - 0)^2 on every token
    assert losses[-1] < 0.01  # 0.0048 at this seed; the loss falls every step
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False))


def test_advantages_are_zero_off_policy_tokens(learner):
    trajectories = [make_trajectory(learner.policy, 1.0, 0)]
    micro = learner.prepare(trajectories).micro_batches[0]
    target = learner.objective.micro_targets(learner.models, micro)
    mask = micro.tensors["policy_mask"]
    assert target.advantages[~mask].abs().sum() == 0 and target.returns[~mask].abs().sum() == 0
    # lambda = 1 for the critic and gamma = 1: every return is the final reward.
    assert torch.allclose(target.returns[mask], torch.ones(9))


def test_checkpoint_round_trip_and_corrupt_checkpoint(learner, tmp_path):
    learner.step([make_trajectory(learner.policy, 1.0, 0)])
    path = learner.save(tmp_path / "ckpt", extra={"step": 1})
    policy = load_policy("tiny", seed=99)
    other = make_learner(policy, ValueModel.from_policy(policy))
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


def test_non_finite_steps_are_skipped_counted_and_abort_after_k():
    policy = load_policy("tiny", seed=0)
    learner = make_learner(policy, ValueModel.from_policy(policy), lr=1e-3, critic_lr=1e-3, max_bad_steps=2)
    poisoned = [make_trajectory(learner.policy, float("nan"), 0)]
    before = [p.detach().clone() for p in learner.policy.parameters()]
    metrics = learner.step(poisoned).metrics
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
        learner = make_learner(policy, ValueModel.from_policy(policy), lr=1e-3, activation_checkpointing=checkpointing)
        learner.step([make_trajectory(load_policy("tiny", seed=0), 1.0, s) for s in range(2)])
        return learner.full_policy_state()

    plain, checkpointed = run(False), run(True)
    for name, tensor in plain.items():
        assert torch.allclose(tensor, checkpointed[name], atol=1e-6), name


def saved_activation_bytes(learner: Learner) -> int:
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
    def learner(checkpointing: bool) -> Learner:
        policy = load_policy("tiny", seed=0)
        return make_learner(policy, ValueModel.from_policy(policy), activation_checkpointing=checkpointing)

    assert saved_activation_bytes(learner(True)) < 0.7 * saved_activation_bytes(learner(False))


def test_value_pretraining_moves_only_the_critic(learner):
    trajectories = [make_trajectory(learner.policy, 1.0, s) for s in range(2)]
    before = [p.detach().clone() for p in learner.policy.parameters()]
    losses = pretrain_critic(learner, trajectories, steps=10)
    assert losses[-1] < losses[0]
    assert all(torch.equal(a, b) for a, b in zip(before, learner.policy.parameters(), strict=True))
    assert learner.version == 0


@pytest.mark.parametrize("algorithm", ["sao", "ppo", "decoupled_ppo", "grpo", "grpo_mask", "dr_grpo", "dapo", "sapo"])
def test_every_algorithm_is_selectable_by_name_and_trains(algorithm):
    policy = load_policy("tiny", seed=0)
    critic = ValueModel.from_policy(policy)
    if algorithm == "sapo":  # one model: the value is read through two reserved vocabulary rows
        reserve_value_tokens(policy)
    learner = make_learner(policy, critic, algorithm, lr=1e-3)
    assert (learner.critic is None) == (algorithm in ("grpo", "grpo_mask", "dr_grpo", "dapo", "sapo"))
    trajectories = [make_trajectory(load_policy("tiny", seed=3), r, s) for s, r in enumerate([1.0, 0.0, 0.0, 1.0])]
    for traj in trajectories:
        traj.group_id = "g"  # one group of four
    before = [p.detach().clone() for p in learner.policy.parameters()]
    result = learner.step(trajectories)
    assert result.metrics["version"] == 1 and result.metrics["policy_tokens"] == 36
    assert any(not torch.equal(a, b) for a, b in zip(before, learner.policy.parameters(), strict=True))
    assert list(result.advantages) == ["j0", "j1", "j2", "j3"] and any(result.advantages.values())


def test_group_advantages_are_normalised_within_each_group():
    policy = load_policy("tiny", seed=0)
    learner = make_learner(policy, None, "grpo")
    trajectories = [make_trajectory(policy, r, s) for s, r in enumerate([1.0, 0.0, 5.0, 5.0])]
    for traj, group in zip(trajectories, ["a", "a", "b", "b"], strict=True):
        traj.group_id = group
    selection = learner.objective.select(trajectories)
    batch = learner.prepare(selection.trajectories)
    [micro] = batch.micro_batches
    [target] = learner.objective.targets(learner.models, selection, batch).micro
    mask = micro.tensors["policy_mask"]
    per_row = {i: target.advantages[row][mask[row]].unique().tolist() for row, i in enumerate(micro.indices)}
    assert per_row[0][0] > 0 > per_row[1][0]  # the better rollout of group a is pushed up
    assert per_row[2] == [0.0] and per_row[3] == [0.0]  # equal rewards: no signal
    assert target.advantages[~mask].abs().sum() == 0
    # The step reports the same per-trajectory advantages, in the batch's order.
    advantages = learner.step(trajectories).advantages
    assert list(advantages) == ["j0", "j1", "j2", "j3"]
    assert advantages["j0"] == pytest.approx(per_row[0][0]) and advantages["j2"] == 0.0


def test_dapo_drops_zero_variance_groups():
    policy = load_policy("tiny", seed=0)
    learner = make_learner(policy, None, "dapo", lr=1e-3)
    same = [make_trajectory(policy, 1.0, s) for s in range(2)]
    result = learner.step(same)
    assert result.metrics == {"zero_variance_dropped": 2, "version": 0, "skipped_steps": 0, "skipped_no_signal": 1}
    assert result.advantages == {"j0": 0.0, "j1": 0.0}
    mixed = [make_trajectory(policy, r, s) for s, r in enumerate([1.0, 0.0], start=2)]
    for traj in mixed:
        traj.group_id = "other"
    result = learner.step(same + mixed)
    assert result.metrics["zero_variance_dropped"] == 2 and result.metrics["policy_tokens"] == 18
    assert learner.version == 1
    # Dropped trajectories are reported with 0; the kept group's are pushed apart.
    assert result.advantages["j0"] == result.advantages["j1"] == 0.0
    assert result.advantages["j2"] > 0 > result.advantages["j3"]


def test_unknown_algorithm_and_missing_critic_are_clear_errors():
    from trainer.algorithms.registry import get_algorithm

    policy = load_policy("tiny", seed=0)
    with pytest.raises(ValidationError, match="reinforce"):
        AlgorithmConfig(name="reinforce")
    with pytest.raises(ValueError, match="unknown algorithm 'reinforce'"):
        get_algorithm("reinforce")
    with pytest.raises(ValueError, match="needs a critic"):
        make_learner(policy, None, "ppo")


def test_frozen_critic_attention_stays_put(learner):
    policy = load_policy("tiny", seed=0)
    learner = make_learner(policy, ValueModel.from_policy(policy), critic_lr=1e-2, freeze_critic_attention=True)
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
    warm_start(learner, [make_trajectory(learner.policy, 1.0, seed=3)], steps=2, lr=1e-2)
    decoder = dict(learner.policy.get_decoder().named_parameters())
    for name, parameter in learner.critic.backbone.named_parameters():
        assert torch.equal(parameter, decoder[name]), name
    assert torch.equal(learner.critic.head.weight, head)
    assert not learner.critic_optimizer.state  # a fresh optimizer


@pytest.mark.parametrize("algorithm", ["sao", "decoupled_ppo"])
def test_sequence_sum_norm_aggregation_trains_every_loss(algorithm):
    """Dr.GRPO's aggregation with a critic's loss: the learner passes the batch's horizon."""
    policy = load_policy("tiny", seed=0)
    config = resolve_algorithm(AlgorithmConfig(name=algorithm, loss_aggregation="sequence_sum_norm"))
    learner = Learner(policy, ValueModel.from_policy(policy), pad_id=0, algorithm=config, optim=LearnerConfig(lr=1e-3))
    metrics = learner.step([make_trajectory(policy, r, s) for s, r in enumerate([1.0, 0.0])]).metrics
    assert metrics["version"] == 1 and torch.isfinite(torch.tensor(metrics["policy_loss"]))


def test_right_padded_batches_drop_the_mask_and_score_every_row_as_alone():
    """A right-padded batch runs without its padding mask (SDPA's fused causal kernel):
    each real token's logprob and value equal those of its row scored alone. A batch with
    padding anywhere else keeps its mask."""
    from trainer.inference.models import causal_attention_mask

    right = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    assert causal_attention_mask(right) is None
    assert causal_attention_mask(torch.ones(2, 3, dtype=torch.long)) is None
    left = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]])
    assert causal_attention_mask(left) is left
    holed = torch.tensor([[1, 0, 1, 1]])
    assert causal_attention_mask(holed) is holed

    policy = load_policy("tiny", seed=0).eval()
    critic = ValueModel.from_policy(policy).eval()
    torch.nn.init.normal_(critic.head.weight, std=0.5)
    torch.manual_seed(3)
    long_row, short_row = torch.randint(5, 200, (9,)), torch.randint(5, 200, (5,))
    ids = torch.zeros((2, 9), dtype=torch.long)
    ids[0], ids[1, :5] = long_row, short_row
    mask = torch.tensor([[1] * 9, [1] * 5 + [0] * 4])
    with torch.no_grad():
        batched = token_logprobs(policy, ids, mask)
        alone = token_logprobs(policy, short_row[None], torch.ones(1, 5, dtype=torch.long))
        values = critic(ids, mask)
        values_alone = critic(short_row[None], torch.ones(1, 5, dtype=torch.long))
    assert torch.allclose(batched[1, :4], alone[0], atol=1e-6)
    assert torch.allclose(values[1, :5], values_alone[0], atol=1e-6)
