"""Pinned numbers of the learner: every algorithm's steps, the critic pre-training, the warm
start and a checkpoint round trip, on the tiny model at a fixed seed on CPU.

The numbers were recorded from the learner before a refactor (issue 34: objectives that
return losses, the learner owning every optimizer step, checkpoints through public state
methods) and must not move with one: a change of behaviour shows up here as a changed
literal, not as a slightly different curve nobody looks at. Each step runs with two
micro-batches (`token_budget=48`), so gradient accumulation is pinned too, and the second
step sees recorded logprobs from the initial policy (ratios away from 1: masks and clips).
One thread, so that the reductions' order (and the last bits) cannot depend on the machine.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

from tests.trainer.test_learner import make_trajectory
from trainer.config import AlgorithmConfig, LearnerConfig
from trainer.inference.models import ValueModel, load_policy, reserve_value_tokens
from trainer.learner import Learner
from trainer.resolve import resolve_algorithm

REL = 1e-6

ALGORITHMS = ["sao", "ppo", "decoupled_ppo", "grpo", "grpo_mask", "dr_grpo", "dapo", "sapo"]


# fmt: off
PINNED = {
    "checkpoint_sao": {
        "metrics": {
            "explained_variance": -0.027175145945869783, "grad_norm": 1.2486802339553833, "masked_high_fraction": 0.0,
            "masked_low_fraction": 0.0, "mean_ratio": 1.013977587223053, "micro_batches": 2.0, "model_tokens": 72.0,
            "policy_loss": 2.551629424095154, "policy_tokens": 36.0, "return_mean": 0.5, "skipped_no_signal": 0.0,
            "skipped_steps": 0.0, "value_loss": 0.19728952646255493, "value_mean": 0.025537100491217442,
            "value_std": 0.01692387506028359, "version": 2.0,
        },
        "policy": 3592.5904125539164,
        "returned": {
            "skipped_no_signal": 0, "skipped_steps": 0, "step": 1, "version": 1,
        },
        "state.json": {
            "skipped_no_signal": 0, "skipped_steps": 0, "step": 1, "version": 1,
        },
    },
    "checkpoint_sapo": {
        "metrics": {
            "approx_kl": 0.024065420031547546, "clip_high_fraction": 0.08333333395421505,
            "clip_low_fraction": 0.0555555559694767, "entropy": 0.0, "grad_norm": 3.0731167793273926,
            "kl": 0.02433844655752182, "loss": 0.25998587906360626, "mean_ratio": 1.011401116847992,
            "micro_batches": 2.0, "model_tokens": 72.0, "policy_loss": 0.08063691109418869, "policy_tokens": 36.0,
            "q_loss": 0.12999441474676132, "return_mean": 0.4878876805305481, "skipped_no_signal": 0.0,
            "skipped_steps": 0.0, "turns": 8.0, "value_loss": 0.22865484654903412, "value_mean": 0.013777568005025387,
            "version": 2.0,
        },
        "policy": 3599.76488092615,
        "returned": {
            "skipped_no_signal": 0,
            "skipped_steps": 0,
            "step": 1,
            "value_token_ids": [2048, 2049],
            "version": 1,
        },
        "state.json": {
            "skipped_no_signal": 0,
            "skipped_steps": 0,
            "step": 1,
            "value_token_ids": [2048, 2049],
            "version": 1,
        },
    },
    "critic_pretraining": {
        "critic": 3593.296716168189,
        "losses": [0.3333333333333333, 0.3200474679470062, 0.28054726123809814],
        "policy": 3589.867659236878,
        "version": 0,
    },
    "dapo": {
        "critic": 0.0,
        "policy": 3599.6984147847506,
        "steps": [
            {
                "advantage/j0": 0.8660238981246948, "advantage/j1": -0.8660238981246948,
                "advantage/j2": -0.8660238981246948, "advantage/j3": 0.8660238981246948,
                "approx_kl": 0.01602365169674158, "clip_high_fraction": 0.08333333395421505,
                "clip_low_fraction": 0.11111111380159855, "grad_norm": 1.8952234983444214,
                "mean_ratio": 1.0205533504486084, "micro_batches": 2.0, "model_tokens": 72.0,
                "policy_loss": -0.009205009788274765, "policy_tokens": 36.0, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "value_loss": 0.0, "version": 1.0, "zero_variance_dropped": 0.0,
            },
            {
                "advantage/j4": -0.8660238981246948, "advantage/j5": 0.8660238981246948,
                "advantage/j6": 0.8660238981246948, "advantage/j7": -0.8660238981246948,
                "approx_kl": 0.023731743916869164, "clip_high_fraction": 0.08333333395421505,
                "clip_low_fraction": 0.0555555559694767, "grad_norm": 2.095313787460327,
                "mean_ratio": 1.010032743215561, "micro_batches": 2.0, "model_tokens": 72.0,
                "policy_loss": 0.06011900678277016, "policy_tokens": 36.0, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "value_loss": 0.0, "version": 2.0, "zero_variance_dropped": 0.0,
            },
        ],
    },
    "decoupled_ppo": {
        "critic": 3594.1028359202146,
        "policy": 3592.5904124169865,
        "steps": [
            {
                "advantage/j0": 0.7496265769004822, "advantage/j1": 0.0, "advantage/j2": 0.0,
                "advantage/j3": 0.7496265769004822, "approx_kl": 0.0, "behav_capped_fraction": 0.0,
                "clip_high_fraction": 0.0, "clip_low_fraction": 0.0, "explained_variance": 0.0,
                "grad_norm": 1.3314027786254883, "mean_behav_weight": 1.0205533504486084, "mean_ratio": 1.0,
                "micro_batches": 2.0, "model_tokens": 72.0, "policy_loss": -0.39069323241710663, "policy_tokens": 36.0,
                "return_mean": 0.5, "skipped_no_signal": 0.0, "skipped_steps": 0.0, "value_loss": 0.23802922666072845,
                "value_mean": 0.0, "value_std": 0.0, "version": 1.0,
            },
            {
                "advantage/j4": -0.020922981202602386, "advantage/j5": 0.7277630567550659,
                "advantage/j6": 0.7442835569381714, "advantage/j7": -0.02430199831724167, "approx_kl": 0.0,
                "behav_capped_fraction": 0.0, "clip_high_fraction": 0.0, "clip_low_fraction": 0.0,
                "explained_variance": -0.027175145945869783, "grad_norm": 1.2486802339553833,
                "mean_behav_weight": 1.0139777064323425, "mean_ratio": 1.0, "micro_batches": 2.0, "model_tokens": 72.0,
                "policy_loss": -0.3329755961894989, "policy_tokens": 36.0, "return_mean": 0.5, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "value_loss": 0.19728952646255493, "value_mean": 0.025537100491217442,
                "value_std": 0.01692387506028359, "version": 2.0,
            },
        ],
    },
    "dr_grpo": {
        "critic": 0.0,
        "policy": 3599.4493550636034,
        "steps": [
            {
                "advantage/j0": 0.5, "advantage/j1": -0.5, "advantage/j2": -0.5, "advantage/j3": 0.5,
                "approx_kl": 0.01602365169674158, "clip_high_fraction": 0.11111111380159855,
                "clip_low_fraction": 0.11111111380159855, "grad_norm": 0.5681378841400146,
                "mean_ratio": 1.0205533504486084, "micro_batches": 2.0, "model_tokens": 72.0,
                "policy_loss": -0.0007174387574195862, "policy_tokens": 36.0, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "value_loss": 0.0, "version": 1.0,
            },
            {
                "advantage/j4": -0.5, "advantage/j5": 0.5, "advantage/j6": 0.5, "advantage/j7": -0.5,
                "approx_kl": 0.024210121482610703, "clip_high_fraction": 0.08333333395421505,
                "clip_low_fraction": 0.0555555559694767, "grad_norm": 0.6381120085716248,
                "mean_ratio": 1.0102028846740723, "micro_batches": 2.0, "model_tokens": 72.0,
                "policy_loss": 0.020972665399312973, "policy_tokens": 36.0, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "value_loss": 0.0, "version": 2.0,
            },
        ],
    },
    "grpo": {
        "critic": 0.0,
        "policy": 3599.5348311160888,
        "steps": [
            {
                "advantage/j0": 0.8660238981246948, "advantage/j1": -0.8660238981246948,
                "advantage/j2": -0.8660238981246948, "advantage/j3": 0.8660238981246948,
                "approx_kl": 0.01602365169674158, "clip_high_fraction": 0.11111111380159855,
                "clip_low_fraction": 0.11111111380159855, "grad_norm": 1.8587397336959839,
                "mean_ratio": 1.0205533504486084, "micro_batches": 2.0, "model_tokens": 72.0,
                "policy_loss": -0.002347216010093689, "policy_tokens": 36.0, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "value_loss": 0.0, "version": 1.0,
            },
            {
                "advantage/j4": -0.8660238981246948, "advantage/j5": 0.8660238981246948,
                "advantage/j6": 0.8660238981246948, "advantage/j7": -0.8660238981246948,
                "approx_kl": 0.024212751537561417, "clip_high_fraction": 0.08333333395421505,
                "clip_low_fraction": 0.0555555559694767, "grad_norm": 2.087670087814331,
                "mean_ratio": 1.010185718536377, "micro_batches": 2.0, "model_tokens": 72.0,
                "policy_loss": 0.0686224102973938, "policy_tokens": 36.0, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "value_loss": 0.0, "version": 2.0,
            },
        ],
    },
    "grpo_mask": {
        "critic": 0.0,
        "policy": 3598.901154059865,
        "steps": [
            {
                "advantage/j0": 0.8660238981246948, "advantage/j1": -0.8660238981246948,
                "advantage/j2": -0.8660238981246948, "advantage/j3": 0.8660238981246948,
                "grad_norm": 2.1063432693481445, "masked_high_fraction": 0.0, "masked_low_fraction": 0.0,
                "mean_ratio": 1.0205533504486084, "micro_batches": 2.0, "model_tokens": 72.0,
                "policy_loss": 0.13299068482592702, "policy_tokens": 36.0, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "value_loss": 0.0, "version": 1.0,
            },
            {
                "advantage/j4": -0.8660238981246948, "advantage/j5": 0.8660238981246948,
                "advantage/j6": 0.8660238981246948, "advantage/j7": -0.8660238981246948, "grad_norm": 2.256333351135254,
                "masked_high_fraction": 0.0, "masked_low_fraction": 0.0, "mean_ratio": 1.0157638192176819,
                "micro_batches": 2.0, "model_tokens": 72.0, "policy_loss": -0.39397408068180084, "policy_tokens": 36.0,
                "skipped_no_signal": 0.0, "skipped_steps": 0.0, "value_loss": 0.0, "version": 2.0,
            },
        ],
    },
    "ppo": {
        "critic": 3594.1028359202146,
        "policy": 3591.5608505854207,
        "steps": [
            {
                "advantage/j0": 0.7496265769004822, "advantage/j1": 0.0, "advantage/j2": 0.0,
                "advantage/j3": 0.7496265769004822, "approx_kl": 0.01602365169674158,
                "clip_high_fraction": 0.11111111380159855, "clip_low_fraction": 0.0, "explained_variance": 0.0,
                "grad_norm": 1.137087106704712, "mean_ratio": 1.0205533504486084, "micro_batches": 2.0,
                "model_tokens": 72.0, "policy_loss": -0.38161902129650116, "policy_tokens": 36.0, "return_mean": 0.5,
                "skipped_no_signal": 0.0, "skipped_steps": 0.0, "value_loss": 0.23802922666072845, "value_mean": 0.0,
                "value_std": 0.0, "version": 1.0,
            },
            {
                "advantage/j4": -0.020922981202602386, "advantage/j5": 0.7277630567550659,
                "advantage/j6": 0.7442835569381714, "advantage/j7": -0.02430199831724167,
                "approx_kl": 0.024143841117620468, "clip_high_fraction": 0.11111111380159855,
                "clip_low_fraction": 0.02777777798473835, "explained_variance": -0.027175145945869783,
                "grad_norm": 1.0550881624221802, "mean_ratio": 1.0154809951782227, "micro_batches": 2.0,
                "model_tokens": 72.0, "policy_loss": -0.3221130222082138, "policy_tokens": 36.0, "return_mean": 0.5,
                "skipped_no_signal": 0.0, "skipped_steps": 0.0, "value_loss": 0.19728952646255493,
                "value_mean": 0.025537100491217442, "value_std": 0.01692387506028359, "version": 2.0,
            },
        ],
    },
    "sao": {
        "critic": 3594.1028359202146,
        "policy": 3592.5904125539164,
        "steps": [
            {
                "advantage/j0": 0.7496265769004822, "advantage/j1": 0.0, "advantage/j2": 0.0,
                "advantage/j3": 0.7496265769004822, "explained_variance": 0.0, "grad_norm": 1.3314027786254883,
                "masked_high_fraction": 0.0, "masked_low_fraction": 0.0, "mean_ratio": 1.0205533504486084,
                "micro_batches": 2.0, "model_tokens": 72.0, "policy_loss": 2.979236125946045, "policy_tokens": 36.0,
                "return_mean": 0.5, "skipped_no_signal": 0.0, "skipped_steps": 0.0, "value_loss": 0.23802922666072845,
                "value_mean": 0.0, "value_std": 0.0, "version": 1.0,
            },
            {
                "advantage/j4": -0.020922981202602386, "advantage/j5": 0.7277630567550659,
                "advantage/j6": 0.7442835569381714, "advantage/j7": -0.02430199831724167,
                "explained_variance": -0.027175145945869783, "grad_norm": 1.2486802339553833,
                "masked_high_fraction": 0.0, "masked_low_fraction": 0.0, "mean_ratio": 1.013977587223053,
                "micro_batches": 2.0, "model_tokens": 72.0, "policy_loss": 2.551629424095154, "policy_tokens": 36.0,
                "return_mean": 0.5, "skipped_no_signal": 0.0, "skipped_steps": 0.0, "value_loss": 0.19728952646255493,
                "value_mean": 0.025537100491217442, "value_std": 0.01692387506028359, "version": 2.0,
            },
        ],
    },
    "sapo": {
        "critic": 0.0,
        "policy": 3599.76488092615,
        "steps": [
            {
                "advantage/j0": 0.9936488270759583, "advantage/j1": -0.99934321641922,
                "advantage/j2": -0.99934321641922, "advantage/j3": 0.9936488270759583, "approx_kl": 0.01602365169674158,
                "clip_high_fraction": 0.11111111380159855, "clip_low_fraction": 0.11111111380159855, "entropy": 0.0,
                "grad_norm": 2.859503984451294, "kl": 0.015355547424405813, "loss": 0.18124759942293167,
                "mean_ratio": 1.0205533504486084, "micro_batches": 2.0, "model_tokens": 72.0,
                "policy_loss": -0.0001740017905831337, "policy_tokens": 36.0, "q_loss": 0.125,
                "return_mean": 0.48750001192092896, "skipped_no_signal": 0.0, "skipped_steps": 0.0, "turns": 8.0,
                "value_loss": 0.23781248927116394, "value_mean": 0.0, "version": 1.0,
            },
            {
                "advantage/j4": -1.0214041471481323, "advantage/j5": 1.0017110109329224,
                "advantage/j6": 0.9864084720611572, "advantage/j7": -0.9762843251228333,
                "approx_kl": 0.024065420031547546, "clip_high_fraction": 0.08333333395421505,
                "clip_low_fraction": 0.0555555559694767, "entropy": 0.0, "grad_norm": 3.0731167793273926,
                "kl": 0.02433844655752182, "loss": 0.25998587906360626, "mean_ratio": 1.011401116847992,
                "micro_batches": 2.0, "model_tokens": 72.0, "policy_loss": 0.08063691109418869, "policy_tokens": 36.0,
                "q_loss": 0.12999441474676132, "return_mean": 0.4878876805305481, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "turns": 8.0, "value_loss": 0.22865484654903412,
                "value_mean": 0.013777568005025387, "version": 2.0,
            },
        ],
    },
    "sapo_one_micro_batch": {
        "critic": 0.0,
        "policy": 3599.764879248666,
        "steps": [
            {
                "advantage/j0": 0.9936488270759583, "advantage/j1": -0.99934321641922,
                "advantage/j2": -0.99934321641922, "advantage/j3": 0.9936488270759583,
                "approx_kl": 0.016023650765419006, "clip_high_fraction": 0.1111111119389534,
                "clip_low_fraction": 0.1111111119389534, "entropy": 0.0, "grad_norm": 2.859503984451294,
                "kl": 0.015355546958744526, "loss": 0.18124760687351227, "mean_ratio": 1.0205533504486084,
                "micro_batches": 1.0, "model_tokens": 72.0, "policy_loss": -0.00017399257922079414,
                "policy_tokens": 36.0, "q_loss": 0.125, "return_mean": 0.48750001192092896, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "turns": 8.0, "value_loss": 0.23781248927116394, "value_mean": 0.0,
                "version": 1.0,
            },
            {
                "advantage/j4": -1.0214041471481323, "advantage/j5": 1.0017110109329224,
                "advantage/j6": 0.9864084720611572, "advantage/j7": -0.9762842655181885,
                "approx_kl": 0.024065416306257248, "clip_high_fraction": 0.0833333358168602,
                "clip_low_fraction": 0.0555555559694767, "entropy": 0.0, "grad_norm": 3.0731165409088135,
                "kl": 0.02433844655752182, "loss": 0.2599858045578003, "mean_ratio": 1.0114010572433472,
                "micro_batches": 1.0, "model_tokens": 72.0, "policy_loss": 0.08063683658838272, "policy_tokens": 36.0,
                "q_loss": 0.12999440729618073, "return_mean": 0.4878877103328705, "skipped_no_signal": 0.0,
                "skipped_steps": 0.0, "turns": 8.0, "value_loss": 0.22865483164787292,
                "value_mean": 0.013777569867670536, "version": 2.0,
            },
        ],
    },
    "warm_start": {
        "after": {
            "explained_variance": 0.0, "grad_norm": 1.0746392011642456, "masked_high_fraction": 0.6666666666666666,
            "masked_low_fraction": 0.0, "mean_ratio": 7.653703272342682, "micro_batches": 2.0, "model_tokens": 54.0,
            "policy_loss": 1.9356904029846191, "policy_tokens": 27.0, "return_mean": 0.6666666666666666,
            "skipped_no_signal": 0.0, "skipped_steps": 0.0, "value_loss": 0.3133090535799662, "value_mean": 0.0,
            "value_std": 0.0, "version": 2.0,
        },
        "critic": 5400.02266176415,
        "losses": [7.668812274932861, 6.811666488647461, 5.974211692810059],
        "policy": 5352.838251440029,
        "version": 2,
    },
}
# fmt: on
"""What each run below gave before the refactor (recorded twice, identical to the last bit); issue
#39 added keys (`skipped_no_signal`, the critic's `value_statistics`) without moving a value."""


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def build(algorithm: str = "sao", seed: int = 0, token_budget: int = 48) -> Learner:
    policy = load_policy("tiny", seed=seed)
    critic = ValueModel.from_policy(policy)
    if algorithm == "sapo":
        reserve_value_tokens(policy)
    optim = LearnerConfig(lr=1e-3, critic_lr=1e-3, token_budget=token_budget)
    return Learner(policy, critic, pad_id=0, algorithm=resolve_algorithm(AlgorithmConfig(name=algorithm)), optim=optim)


def batch(rewards: list[float], seeds: range) -> list:
    """One group of rollouts of the initial tiny policy (seed 3)."""
    sampler = load_policy("tiny", seed=3)
    trajectories = [make_trajectory(sampler, r, s) for s, r in zip(seeds, rewards, strict=True)]
    for trajectory in trajectories:
        trajectory.group_id = "g"
    return trajectories


def checksum(module: torch.nn.Module | None) -> float:
    """Sum of |weights|: moves with any update of any parameter."""
    if module is None:
        return 0.0
    return float(sum(p.detach().double().abs().sum() for p in module.parameters()))


def rounded(values: dict) -> dict:
    return {key: float(value) for key, value in values.items()}


def run_algorithm(algorithm: str, token_budget: int = 48) -> dict:
    learner = build(algorithm, token_budget=token_budget)
    steps = []
    for rewards, seeds in (([1.0, 0.0, 0.0, 1.0], range(4)), ([0.0, 1.0, 1.0, 0.0], range(4, 8))):
        result = learner.step(batch(rewards, seeds))
        advantages = {f"advantage/{key}": value for key, value in result.advantages.items()}
        steps.append(rounded({**result.metrics, **advantages}))
    return {"steps": steps, "policy": checksum(learner.policy), "critic": checksum(learner.critic)}


def run_critic_pretraining() -> dict:
    learner = build("sao")
    learner.begin_critic_pretraining(batch([1.0, 0.0, 1.0], range(3)))
    losses = learner.critic_pretraining_steps(3)
    learner.end_critic_pretraining()
    return {
        "losses": losses,
        "version": learner.version,
        "policy": checksum(learner.policy),
        "critic": checksum(learner.critic),
    }


def run_warm_start() -> dict:
    learner = build("sao")
    learner.begin_warm_start(batch([1.0, 1.0], range(2)), lr=1e-2)
    losses = learner.warm_start_steps(3)
    learner.end_warm_start()
    after = learner.step(batch([1.0, 0.0, 1.0], range(3)))
    return {
        "losses": losses,
        "version": learner.version,
        "policy": checksum(learner.policy),
        "critic": checksum(learner.critic),
        "after": rounded(after.metrics),
    }


def run_checkpoint(tmp_path, algorithm: str) -> dict:
    """Step, save, load into a learner of another seed, step both on the same batch; and the
    same through the in-memory state a resize moves (`export_state` / `import_state`)."""
    from trainer.learner import checkpoint

    learner = build(algorithm)
    learner.step(batch([1.0, 0.0, 0.0, 1.0], range(4)))
    path = learner.save(tmp_path / algorithm, extra={"step": 1})
    state_json = json.loads((path / "state.json").read_text())
    loaded = build(algorithm, seed=99)
    returned = loaded.load(path)
    moved = build(algorithm, seed=98)
    checkpoint.import_state(moved, copy.deepcopy(checkpoint.export_state(learner)))  # not the live tensors
    second = batch([0.0, 1.0, 1.0, 0.0], range(4, 8))
    metrics = [rounded(x.step(second).metrics) for x in (learner, loaded, moved)]
    assert_pinned(metrics[1], metrics[0], "loaded")  # resumed: the step the saved learner takes
    assert_pinned(metrics[2], metrics[0], "moved")
    return {"state.json": state_json, "returned": returned, "metrics": metrics[0], "policy": checksum(loaded.policy)}


def assert_pinned(got, want, where: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), f"{where}: {sorted(got)} != {sorted(want)}"
        for key in want:
            assert_pinned(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for index, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_pinned(a, b, f"{where}[{index}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=REL), where
    else:
        assert got == want, where


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithms_steps_are_pinned(algorithm):
    assert_pinned(run_algorithm(algorithm), PINNED[algorithm], algorithm)


def test_sapos_one_micro_batch_step_reuses_its_forward_with_the_same_numbers():
    assert_pinned(run_algorithm("sapo", token_budget=16384), PINNED["sapo_one_micro_batch"], "sapo")


def test_critic_pretraining_is_pinned():
    assert_pinned(run_critic_pretraining(), PINNED["critic_pretraining"], "critic_pretraining")


def test_warm_start_and_the_step_after_it_are_pinned():
    assert_pinned(run_warm_start(), PINNED["warm_start"], "warm_start")


@pytest.mark.parametrize("algorithm", ["sao", "sapo"])
def test_checkpoint_round_trips_are_pinned(tmp_path, algorithm):
    assert_pinned(run_checkpoint(tmp_path, algorithm), PINNED[f"checkpoint_{algorithm}"], algorithm)
