"""SAPO in the learner: one model for policy and value through two reserved vocabulary rows.

Real tiny models throughout: the builder reserves the rows, the learner steps, the hf engine
samples with the rows banned, and checkpoints carry the ids."""

import json
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import needs_bwrap
from tests.trainer.fsdp_worker import fixed_batch
from tests.trainer.test_learner import make_trajectory
from trainer.build import build_learner
from trainer.config import AlgorithmConfig, ConfigError, LearnerConfig, SAPOConfig, TrainConfig
from trainer.inference.engines.hf import HFEngine
from trainer.inference.engines.weights import WeightSyncError
from trainer.inference.models import VALUE_TOKENS, ValueModel, load_policy, load_tokenizer, reserve_value_tokens
from trainer.learner import CheckpointError, Learner, StepResult, token_logprobs
from trainer.learner.batching import padded_batch
from trainer.learner.objectives import turn_layout
from trainer.resolve import load_config, resolve, resolve_algorithm

CPU_DEMO = Path(__file__).parents[2] / "configs" / "train_swe.yaml"
PLUS, MINUS = 2048, 2049  # the tiny vocabulary has 2048 rows; the two value rows follow


def sapo(mesh=None, lr: float = 1e-6, token_budget: int = 16384, **fields) -> tuple[Learner, object]:
    """A SAPO learner on the tiny model as `trainer.build` makes one (seed 0, the two value
    rows reserved), with `fields` of `SAPOConfig`; and the tokenizer that names the rows."""
    tokenizer, policy = load_tokenizer("tiny"), load_policy("tiny", seed=0)
    ids = reserve_value_tokens(policy, tokenizer)
    algorithm = resolve_algorithm(AlgorithmConfig(name="sapo", sapo=SAPOConfig(**fields)))
    optim = LearnerConfig(lr=lr, token_budget=token_budget)
    learner = Learner(
        policy, None, pad_id=tokenizer.pad_token_id, algorithm=algorithm, optim=optim, value_token_ids=ids, mesh=mesh
    )
    return learner, tokenizer


def sao() -> Learner:
    policy = load_policy("tiny", seed=0)
    return Learner(
        policy,
        ValueModel.from_policy(policy),
        pad_id=0,
        algorithm=resolve_algorithm(AlgorithmConfig()),
        optim=LearnerConfig(),
    )


def parameter_count(*modules) -> int:
    seen = {id(p): p.numel() for m in modules for p in m.parameters()}  # tied weights count once
    return sum(seen.values())


def readouts(learner: Learner, trajectories) -> tuple[torch.Tensor, torch.Tensor]:
    """Every turn's V and its reward-to-go (gamma = 1: the final reward), over the batch."""
    tensors = padded_batch(trajectories, learner.pad_id)
    layout = turn_layout(trajectories, tensors)
    with torch.no_grad():
        values = learner.objective.forward(learner.models, tensors, values_only=True)[1].gather(1, layout["v_index"])
    rewards = torch.tensor([t.reward for t in trajectories])[:, None].expand_as(values)
    return values[layout["turn_mask"]], rewards[layout["turn_mask"]]


def test_builder_reserves_two_rows_and_builds_no_critic():
    learner, tokenizer = build_learner(resolve(TrainConfig(algorithm={"name": "sapo"})))
    assert learner.critic is None and learner.critic_optimizer is None
    assert learner.value_token_ids == (PLUS, MINUS) == learner.banned
    assert tokenizer.convert_tokens_to_ids(list(VALUE_TOKENS)) == [PLUS, MINUS] and len(tokenizer) == 2050
    assert learner.policy.config.value_token_ids == [PLUS, MINUS]
    # The memory claim: the shared value costs two embedding rows; a separate critic ~doubles the model.
    plain = load_policy("tiny", seed=0)
    hidden = plain.config.hidden_size
    assert parameter_count(learner.policy) - parameter_count(plain) == 2 * hidden
    separate, _ = build_learner(resolve(TrainConfig(algorithm={"name": "sao"})))
    assert parameter_count(separate.policy, separate.critic) >= 1.9 * parameter_count(plain)
    # The rows start identical: every value reads 0 until the value loss separates them.
    values, _ = readouts(learner, [make_trajectory(plain, 1.0, 0)])
    assert values.abs().max() == 0
    # Same seed, same ids, same weights: what a resumed run rebuilds before loading.
    again, _ = sapo()  # the tests' own construction builds the same model
    for name, tensor in learner.policy.state_dict().items():
        assert torch.equal(tensor, again.policy.state_dict()[name]), name


def test_reserving_is_idempotent_and_a_padded_vocabulary_keeps_its_tokenizer():
    policy, tokenizer = load_policy("tiny", seed=0), load_tokenizer("tiny")
    assert reserve_value_tokens(policy, tokenizer) == (PLUS, MINUS)
    assert reserve_value_tokens(policy, tokenizer) == (PLUS, MINUS)  # recorded: nothing changes
    assert policy.get_input_embeddings().weight.shape[0] == 2050 and len(tokenizer) == 2050
    padded = load_policy("tiny", seed=0)
    padded.resize_token_embeddings(2112)  # rows beyond the tokenizer, as Qwen pads its vocabulary
    fresh = load_tokenizer("tiny")
    assert reserve_value_tokens(padded, fresh) == (2112, 2113)
    assert len(fresh) == 2048  # no token text for ids the tokenizer cannot reach


def test_sapo_step_trains_policy_and_value_rows_with_finite_losses():
    learner, _ = sapo(lr=1e-3)
    reference = load_policy("tiny", seed=3)
    trajectories = [make_trajectory(reference, r, s) for s, r in enumerate([1.0, 0.0, 1.0])]
    before = {n: p.detach().clone() for n, p in learner.policy.named_parameters()}
    result = learner.step(trajectories)
    metrics = result.metrics
    assert metrics["version"] == 1 == learner.version and metrics["skipped_steps"] == 0
    assert metrics["policy_tokens"] == 27 and metrics["turns"] == 6
    for key in ("loss", "policy_loss", "value_loss", "q_loss", "kl", "grad_norm"):
        assert torch.isfinite(torch.tensor(metrics[key])), key
    assert metrics["value_loss"] > 0 and metrics["q_loss"] > 0 and metrics["kl"] > 0  # off-policy data: KL > 0
    assert "value_loss" in metrics and learner.critic is None
    after = dict(learner.policy.named_parameters())
    changed = [n for n in before if not torch.equal(before[n], after[n])]
    assert any("layers" in n for n in changed)  # the shared backbone moved
    head = learner.policy.get_output_embeddings().weight
    rows = before[next(n for n, p in learner.policy.named_parameters() if p is head)]
    assert not torch.equal(rows[PLUS], head[PLUS]) and not torch.equal(
        rows[PLUS] - rows[MINUS], head[PLUS] - head[MINUS]
    )
    # Each trajectory's mean (normalised) advantage, by its id: the two rewarded ones above
    # the unrewarded one.
    assert list(result.advantages) == ["j0", "j1", "j2"]
    assert result.advantages["j0"] > result.advantages["j1"] < result.advantages["j2"]
    assert result.advantages["j1"] < 0


def test_the_loss_is_sapos_combination_of_its_terms():
    """`L_clip + c_V L_V + c_Q L_Q + beta KL - c_H H` (arXiv 2608.19842), as the objective
    combines `sapo_loss_terms` (one micro-batch: every token and turn weight is 1)."""
    learner, _ = sapo(c_v=0.7, c_q=0.3, beta=0.05, c_h=0.02)
    selection = learner.objective.select(fixed_batch())
    batch = learner.prepare(selection.trajectories)
    [micro] = batch.micro_batches
    [target] = learner.objective.targets(learner.models, selection, batch).micro
    part = learner.objective.micro_loss(learner.models, micro, target, batch)
    terms = part.sums
    assert all(terms[key] != 0 for key in ("policy_loss", "value_loss", "q_loss", "kl", "entropy"))
    expected = (
        terms["policy_loss"] + 0.7 * terms["value_loss"] + 0.3 * terms["q_loss"] + 0.05 * terms["kl"]
    ) - 0.02 * terms["entropy"]
    assert float(part.loss.detach()) == pytest.approx(expected, rel=1e-6) and terms["loss"] == pytest.approx(
        expected, rel=1e-6
    )


def test_policy_logprobs_never_see_the_value_rows():
    learner, _ = sapo()
    with torch.no_grad():  # make the value rows dominate the unbanned softmax
        head = learner.policy.get_output_embeddings().weight
        head[PLUS] = head[:PLUS].mean(0) + 5.0
    ids = torch.randint(5, 2000, (2, 20))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        banned = token_logprobs(learner.policy, ids, mask, banned=learner.banned)
        logits = learner.policy(input_ids=ids).logits[:, :-1, :PLUS]
        expected = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        unbanned = token_logprobs(learner.policy, ids, mask)
    assert torch.allclose(banned, expected, atol=1e-6)
    assert not torch.allclose(banned, unbanned, atol=1e-2)  # the ban is what makes them agree


def count_forwards(module) -> list[int]:
    calls = [0]
    module.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


def test_one_forward_per_step_and_micro_batching_gives_the_same_update():
    batch = fixed_batch()  # five two-turn trajectories scored by another policy: ratios away from 1

    def run(token_budget: int):
        learner, _ = sapo(lr=1e-3, token_budget=token_budget, beta=0.01, c_h=0.01)
        # Plain SGD: the update is the (clipped) gradient itself. Adam's first step is about
        # lr * sign(g), which turns float noise in near-zero gradients into lr-sized differences.
        learner.policy_optimizer = torch.optim.SGD(learner.policy.parameters(), lr=1.0)
        forwards = count_forwards(learner.policy)
        metrics = learner.step(batch).metrics
        return learner.full_policy_state(), metrics, forwards[0]

    whole, whole_metrics, whole_forwards = run(1 << 16)
    split, split_metrics, split_forwards = run(40)
    assert whole_metrics["micro_batches"] == 1 and whole_forwards == 1  # one forward: logprobs, V and Q
    assert split_metrics["micro_batches"] > 1 and split_forwards == 2 * split_metrics["micro_batches"]
    for key in ("loss", "policy_loss", "value_loss", "q_loss", "kl", "entropy", "value_mean", "return_mean"):
        assert abs(whole_metrics[key] - split_metrics[key]) < 1e-5, key
    for name, tensor in whole.items():
        assert torch.allclose(tensor, split[name], atol=1e-6), name


def test_value_readout_moves_toward_the_returns():
    learner, _ = sapo(lr=1e-3)
    reference = load_policy("tiny", seed=3)
    trajectories = [make_trajectory(reference, r, s) for s, r in enumerate([1.0, 0.0, 1.0, 1.0])]
    values, targets = readouts(learner, trajectories)
    error_before = (values - targets).abs().mean()
    losses = [learner.step(trajectories).metrics["value_loss"] for _ in range(12)]
    values, targets = readouts(learner, trajectories)
    assert (values - targets).abs().mean() < 0.5 * error_before
    assert losses[-1] < 0.5 * losses[0]
    # V tells the rewarded trajectories from the unrewarded one (turns in trajectory order:
    # two per trajectory, so the unrewarded second trajectory's are entries 2 and 3).
    rewarded, unrewarded = torch.cat([values[:2], values[4:]]), values[2:4]
    assert rewarded.min() > unrewarded.max() + 0.5


def test_non_finite_sapo_steps_are_skipped():
    learner, _ = sapo(lr=1e-3)
    before = [p.detach().clone() for p in learner.policy.parameters()]
    metrics = learner.step([make_trajectory(load_policy("tiny", seed=3), float("nan"), 0)]).metrics
    assert metrics["skipped_steps"] == 1 and learner.version == 0
    assert all(torch.equal(a, b) for a, b in zip(before, learner.policy.parameters(), strict=True))


def dominant_value_rows(policy) -> None:
    """Point both value rows along the mean final hidden state, so that without a ban they
    take about half the probability mass: a missing ban cannot go unnoticed."""
    with torch.no_grad():
        hidden = policy(input_ids=torch.randint(5, 2000, (4, 64)), output_hidden_states=True).hidden_states[-1]
        direction = hidden.reshape(-1, hidden.shape[-1]).mean(0)
        head = policy.get_output_embeddings().weight
        head[PLUS] = 8.0 * direction / direction.norm() ** 2
        head[MINUS] = 7.5 * direction / direction.norm() ** 2


def sampled_ids(engine: HFEngine, prompts, seeds=(0, 1), tokens: int = 32) -> list[int]:
    out = []
    for seed in seeds:
        out += [t for g in engine.generate(prompts, max_new_tokens=tokens, seed=seed) for t in g.token_ids]  # batched
        out += engine.generate(prompts[:1], max_new_tokens=tokens, seed=seed)[0].token_ids  # prefix-reusing path
    return out


def test_hf_engine_never_samples_the_value_tokens_and_scores_like_the_learner():
    learner, tokenizer = sapo()
    dominant_value_rows(learner.policy)
    prompts = [tokenizer.encode("def add(a, b):"), tokenizer.encode("import os\nprint(")]

    control = HFEngine(load_policy("tiny", seed=0), banned_token_ids=())  # no ban: the rows get sampled
    control.load_weights(learner.engine_weights(), 1)
    assert control.banned_token_ids == (PLUS, MINUS)  # rows an update appends are banned anyway
    control.banned_token_ids = ()
    assert {PLUS, MINUS} & set(sampled_ids(control, prompts, seeds=(0,), tokens=8))

    # An engine built from the original checkpoint grows to the learner's rows and bans them.
    engine = HFEngine(load_policy("tiny", seed=0))
    assert engine.banned_token_ids == ()
    engine.load_weights(learner.engine_weights(), 1)
    assert engine.banned_token_ids == (PLUS, MINUS) and engine.model.config.vocab_size == 2050
    assert not {PLUS, MINUS} & set(sampled_ids(engine, prompts))

    # Learner and engine logprobs agree with banning on (and would not without it).
    generations = engine.generate(prompts, max_new_tokens=24, seed=11)
    generations.append(engine.generate(prompts[:1], max_new_tokens=24, seed=12)[0])
    for prompt, generation in zip([*prompts, prompts[0]], generations, strict=True):
        ids = torch.tensor([prompt + generation.token_ids])
        with torch.no_grad():
            scored = token_logprobs(learner.policy, ids, torch.ones_like(ids), banned=learner.banned)
            unbanned = token_logprobs(learner.policy, ids, torch.ones_like(ids))
        recorded = torch.tensor(generation.logprobs)
        assert torch.allclose(scored[0, len(prompt) - 1 :], recorded, atol=1e-5)
        assert not torch.allclose(unbanned[0, len(prompt) - 1 :], recorded, atol=1e-2)


def test_engine_keeps_its_weights_when_an_update_does_not_fit():
    learner, _ = sapo()
    engine = HFEngine(load_policy("tiny", seed=0))
    state = learner.engine_weights()
    layer = next(k for k in state if "mlp" in k)
    state[layer] = torch.zeros(3, 3)
    with pytest.raises(WeightSyncError, match=layer):
        engine.load_weights(state, 1)
    assert engine.model.get_input_embeddings().weight.shape[0] == 2048 and engine.banned_token_ids == ()


def test_an_exported_sapo_policy_is_banned_by_any_engine_that_loads_it(tmp_path):
    from trainer.inference.engines import make_engine

    learner, tokenizer = sapo(lr=1e-3)
    learner.step([make_trajectory(load_policy("tiny", seed=3), 1.0, 0)])
    path = learner.save(tmp_path / "ckpt", extra={"step": 1}, tokenizer=tokenizer)
    assert json.loads((path / "state.json").read_text())["value_token_ids"] == [PLUS, MINUS]
    assert json.loads((path / "policy" / "config.json").read_text())["value_token_ids"] == [PLUS, MINUS]
    engine = make_engine("hf", str(path / "policy"))
    assert engine.banned_token_ids == (PLUS, MINUS)
    assert load_tokenizer(str(path / "policy")).convert_tokens_to_ids(list(VALUE_TOKENS)) == [PLUS, MINUS]
    # A SAPO learner built on the export finds the recorded ids and adds no rows.
    exported = load_policy(str(path / "policy"))
    assert reserve_value_tokens(exported, load_tokenizer(str(path / "policy"))) == (PLUS, MINUS)
    assert exported.get_input_embeddings().weight.shape[0] == 2050


def test_checkpoint_round_trip_without_a_critic(tmp_path):
    import torch.distributed.checkpoint as dcp

    learner, tokenizer = sapo(lr=1e-3)
    trajectories = [make_trajectory(load_policy("tiny", seed=3), r, s) for s, r in enumerate([1.0, 0.0])]
    learner.step(trajectories)
    path = learner.save(tmp_path / "ckpt", extra={"step": 1}, tokenizer=tokenizer)
    keys = dcp.FileSystemReader(str(path / "dcp")).read_metadata().state_dict_metadata
    assert {k.split(".")[0] for k in keys} == {"policy", "policy_optim"}  # no critic, no second model

    resumed, _ = sapo(lr=1e-3)
    state = resumed.load(path)
    assert state["step"] == 1 and resumed.version == 1
    for name, tensor in learner.policy.state_dict().items():
        assert torch.equal(tensor, resumed.policy.state_dict()[name]), name
    # Optimizer state came back too: the next step is the same on both.
    a, b = learner.step(trajectories).metrics, resumed.step(trajectories).metrics
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    for name, tensor in learner.policy.state_dict().items():
        assert torch.allclose(tensor, resumed.policy.state_dict()[name], atol=1e-6), name

    # A learner that reads values elsewhere (or not at all) refuses the checkpoint, by name.
    with pytest.raises(CheckpointError, match=r"ckpt.*\(2048, 2049\).*\(sao\) from None"):
        sao().load(path)
    other = load_policy("tiny", seed=0)
    elsewhere = Learner(
        other,
        None,
        pad_id=0,
        algorithm=resolve_algorithm(AlgorithmConfig(name="sapo")),
        optim=LearnerConfig(),
        value_token_ids=(7, 9),
    )
    with pytest.raises(CheckpointError, match="tokens"):
        elsewhere.load(path)


def test_sapo_needs_its_value_tokens_and_validates_them():
    config = {"algorithm": resolve_algorithm(AlgorithmConfig(name="sapo")), "optim": LearnerConfig()}
    with pytest.raises(ValueError, match="reserve_value_tokens"):
        Learner(load_policy("tiny", seed=0), None, pad_id=0, **config)
    with pytest.raises(ValueError, match="below the vocabulary size 2048"):
        Learner(load_policy("tiny", seed=0), None, pad_id=0, value_token_ids=(2047, 2048), **config)
    policy = load_policy("tiny", seed=0)
    critic = ValueModel.from_policy(policy)
    reserve_value_tokens(policy)  # the ids recorded in the config are found without being passed
    learner = Learner(policy, critic, pad_id=0, **config)
    assert learner.value_token_ids == (PLUS, MINUS) and learner.critic is None


def test_sapo_config_fields():
    fields = {"tau_v": 4, "r_max": 2, "c_v": 1, "c_q": 0, "beta": 0, "c_h": 0.01}
    config = load_config(None, ["algorithm.name=sapo", *(f"algorithm.sapo.{k}={v}" for k, v in fields.items())])
    assert config.algorithm.sapo.model_dump() == fields
    learner, _ = build_learner(config)
    assert learner.objective.config.model_dump() == fields  # what the SAPO objective weighs its terms by
    with pytest.raises(ConfigError, match="tau_v"):
        load_config(None, ["algorithm.name=sapo", "algorithm.sapo.tau_v=0"])


@needs_bwrap
def test_train_with_sapo_end_to_end(tmp_path, ray_cluster):
    """`python -m trainer.train configs/train_swe.yaml algorithm.name=sapo run.steps=1`, made
    small (a 2-step warm start, which publishes version 1)."""
    from trainer.train import train

    overrides = [f"run.output_dir={tmp_path}", "run.name=sapo", "algorithm.name=sapo", "run.steps=1",
                 "warm_start.steps=2", "warm_start.critic_pretrain_steps=0", "orchestrator.episodes_per_step=2",
                 "rollout.max_turns=2", "rollout.max_new_tokens=12"]  # fmt: skip
    run_dir = train(load_config(CPU_DEMO, overrides))
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["version"] == 2 and records[-1]["policy_tokens"] > 0 and records[-1]["turns"] > 0
    assert torch.isfinite(torch.tensor(records[-1]["value_loss"]))
    checkpoint = run_dir / "checkpoints" / "step_000001"
    assert json.loads((checkpoint / "state.json").read_text())["value_token_ids"] == [PLUS, MINUS]
    assert json.loads((checkpoint / "policy" / "config.json").read_text())["value_token_ids"] == [PLUS, MINUS]


def sharded_step(mesh=None) -> tuple[Learner, StepResult]:
    """One SAPO step on the fixed batch, in several micro-batches, with plain SGD (see above)."""
    learner, _ = sapo(mesh=mesh, lr=1e-3, token_budget=40, beta=0.01)
    learner.policy_optimizer = torch.optim.SGD(learner.policy.parameters(), lr=1.0)
    return learner, learner.step(fixed_batch())


@pytest.mark.slow
def test_two_fsdp_ranks_take_the_same_sapo_step_as_one_process(tmp_path):
    """Turn advantages are normalised over the whole batch: moments all-reduced across ranks."""
    from tests.trainer.test_fsdp import run_two_ranks

    run_two_ranks(tmp_path, module="tests.trainer.test_sapo_learner")
    sharded = torch.load(tmp_path / "after_step.pt", weights_only=True)
    learner, result = sharded_step()
    metrics = result.metrics
    assert metrics["micro_batches"] > 1 and sharded["metrics"]["turns"] == metrics["turns"] == 10
    for key in ("loss", "policy_loss", "value_loss", "q_loss", "kl", "value_mean", "return_mean"):
        assert abs(metrics[key] - sharded["metrics"][key]) < 1e-5, key
    for name, tensor in learner.full_policy_state().items():
        assert torch.allclose(tensor, sharded["policy"][name], atol=1e-5), name
    # Rank 0 reports every trajectory's advantage, its own share's and the other rank's.
    assert list(sharded["advantages"]) == list(result.advantages) == [f"j{i}" for i in range(5)]
    for key, value in result.advantages.items():
        assert abs(value - sharded["advantages"][key]) < 1e-5, key


if __name__ == "__main__":  # run by torchrun from the test above
    from trainer import distributed

    mesh = distributed.init_from_env()
    learner, result = sharded_step(mesh)
    state = learner.full_policy_state()
    if distributed.rank() == 0:
        saved = {"policy": state, "metrics": result.metrics, "advantages": result.advantages}
        torch.save(saved, Path(sys.argv[1]) / "after_step.pt")
    distributed.exit_rank()
