"""Learner throughput: the SAO step against a plain PyTorch loop doing the same model work.

Same model, same batch, same run, interleaved: the baseline is a hand-written loop with the
same forward/backward/AdamW work per step (policy forward+backward+step, one critic forward
for the values, `critic_steps` critic forward+backward+step) and none of the learner's
machinery (micro-batching, GAE, masking, guards). `ratio` = learner / baseline tokens per
second (target >= 0.85 on CPU). `weight_sync_ms`: publishing the learner's weights to the
hf engine (gather the full state, copy into the engine's model, bump the version).
"""

from __future__ import annotations

import time

import torch

from bench.common import arguments, percentile, report
from trainer.engines.hf import HFEngine
from trainer.learner import SAOLearner, _batch, token_logprobs
from trainer.models import ValueModel, load_policy
from trainer.trajectory import Trajectory

ROUNDS = 12


def episodes(count: int, turns: int, action_tokens: int, observation_tokens: int) -> list[Trajectory]:
    """Synthetic multi-turn episodes: a prompt, then alternating actions and observations."""
    generator = torch.Generator().manual_seed(0)
    batch = []
    for index in range(count):
        traj = Trajectory(task_id=f"e{index}", reward=float(index % 2), terminated=True)
        traj.extend(torch.randint(5, 2000, (64,), generator=generator).tolist(), policy=False)
        for _ in range(turns):
            action = torch.randint(5, 2000, (action_tokens,), generator=generator).tolist()
            traj.extend(action, policy=True, logprobs=[-7.0] * action_tokens)
            traj.extend(torch.randint(5, 2000, (observation_tokens,), generator=generator).tolist(), policy=False)
        batch.append(traj)
    return batch


def make_models():
    policy = load_policy("tiny", seed=0)
    return policy, ValueModel.from_policy(policy)


def baseline_step(policy, critic, policy_opt, critic_opt, batch, critic_steps: int) -> None:
    mask = batch["policy_mask"].float()
    logp = token_logprobs(policy, batch["input_ids"], batch["attention_mask"])
    with torch.no_grad():
        critic(batch["input_ids"], batch["attention_mask"])
    loss = -(logp * mask).sum() / mask.sum()
    policy_opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    policy_opt.step()
    for _ in range(critic_steps):
        values = critic(batch["input_ids"], batch["attention_mask"])[:, :-1]
        critic_loss = ((values**2) * mask).sum() / mask.sum()
        critic_opt.zero_grad()
        critic_loss.backward()
        torch.nn.utils.clip_grad_norm_(critic.parameters(), 1.0)
        critic_opt.step()


def main() -> None:
    args = arguments("learner")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    trajectories = episodes(count=8, turns=4, action_tokens=48, observation_tokens=64)
    tokens = sum(len(t) for t in trajectories)

    policy, critic = make_models()
    learner = SAOLearner(policy, critic, pad_id=0, lr=1e-4, critic_lr=1e-4, token_budget=1 << 20)
    base_policy, base_critic = make_models()
    base_policy_opt = torch.optim.AdamW(base_policy.parameters(), lr=1e-4)
    base_critic_opt = torch.optim.AdamW(base_critic.parameters(), lr=1e-4)
    batch = _batch(trajectories, 0)

    learner_s, baseline_s = [], []
    for round_index in range(ROUNDS + 2):  # two warm-up rounds
        start = time.perf_counter()
        learner.step(trajectories)
        learner_time = time.perf_counter() - start
        start = time.perf_counter()
        baseline_step(base_policy, base_critic, base_policy_opt, base_critic_opt, batch, learner.critic_steps)
        baseline_time = time.perf_counter() - start
        if round_index >= 2:
            learner_s.append(learner_time)
            baseline_s.append(baseline_time)

    engine = HFEngine(load_policy("tiny", seed=1))
    sync_ms = []
    for version in range(20):
        start = time.perf_counter()
        engine.load_weights(learner.engine_weights(), version)
        sync_ms.append((time.perf_counter() - start) * 1000)

    tokens_per_s = tokens / percentile(learner_s, 50)
    baseline_tokens_per_s = tokens / percentile(baseline_s, 50)
    report(
        "bench.learner (tiny model, CPU)",
        {
            "tokens_per_step": tokens,
            "tokens_per_s": tokens_per_s,
            "baseline_tokens_per_s": baseline_tokens_per_s,
            "ratio": tokens_per_s / baseline_tokens_per_s,
            "weight_sync_ms": percentile(sync_ms, 50),
            "rounds": ROUNDS,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
