"""Learner throughput: the SAO step against a plain PyTorch loop doing the same model work.

Same model, same batch, same run, interleaved: the baseline is a hand-written loop with the
same forward/backward/AdamW work per step (policy forward+backward+step, one critic forward
for the values, `critic_steps` critic forward+backward+step) and none of the learner's
machinery (micro-batching, GAE, masking, guards). `ratio` = learner / baseline tokens per
second (target >= 0.85 on CPU). `causal_speedup`: a policy forward+backward on right-padded
multi-turn-sized episodes with the padding mask against without it (what the learner runs,
`trainer.inference.models.causal_attention_mask`). `weight_sync_ms`: publishing the learner's weights to the
hf engine (gather the full state, copy into the engine's model, bump the version).

`--gpu` (on a CUDA machine, run by `make gpu-check`): the learner's SAO step on a randomly
initialised 0.5B model of Qwen2.5-0.5B's shape in bf16, as tokens/s and MFU (model FLOPs:
6 x parameters per trained token for the policy and 3 critic passes, against `--peak-tflops`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from bench.common import RESULTS, percentile, report
from trainer.config import AlgorithmConfig, LearnerConfig
from trainer.inference.engines.hf import HFEngine
from trainer.inference.models import ValueModel, load_policy
from trainer.inference.trajectory import Trajectory
from trainer.learner import Learner, token_logprobs
from trainer.learner.batching import padded_batch
from trainer.resolve import resolve_algorithm

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


def padding_mask_rounds(rounds: int = 4) -> tuple[list[float], list[float]]:
    """Seconds of one policy forward+backward on multi-turn-sized episodes of unequal lengths
    (8 of 1,900-2,240 tokens, right-padded), with the padding mask handed to the model (the
    learner before `causal_attention_mask`) and without it (SDPA's fused causal kernel, what
    the learner runs now), interleaved."""
    policy = load_policy("tiny", seed=0)
    generator = torch.Generator().manual_seed(1)
    trajectories = []
    for index in range(8):
        traj = Trajectory(task_id=f"m{index}", reward=1.0, terminated=True)
        tokens = torch.randint(5, 2000, (1900 + 48 * index,), generator=generator).tolist()
        traj.extend(tokens, policy=True, logprobs=[-7.0] * len(tokens))
        trajectories.append(traj)
    batch = padded_batch(trajectories, 0)
    masked, causal = [], []
    for round_index in range(rounds + 1):  # one warm-up round
        for mask, times in ((batch["attention_mask"], masked), (None, causal)):
            start = time.perf_counter()
            logits = policy(input_ids=batch["input_ids"], attention_mask=mask).logits
            torch.log_softmax(logits.float(), -1)[..., 0].mean().backward()
            policy.zero_grad(set_to_none=True)
            if round_index:
                times.append(time.perf_counter() - start)
    return masked, causal


def gpu_main(args) -> None:
    from transformers import AutoModelForCausalLM, Qwen2Config

    from trainer import distributed

    config = Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True, max_position_embeddings=32768,
    )  # fmt: skip
    torch.manual_seed(0)
    policy = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    critic = ValueModel.from_policy(policy)
    mesh = distributed.init_from_env() if "WORLD_SIZE" in os.environ else None
    optim = LearnerConfig(lr=1e-6, token_budget=16384, bf16=mesh is not None)
    learner = Learner(
        policy.cuda(), critic.cuda(), pad_id=0, algorithm=resolve_algorithm(AlgorithmConfig()), optim=optim, mesh=mesh
    )
    trajectories = episodes(count=16, turns=4, action_tokens=128, observation_tokens=128)
    tokens = sum(len(t) for t in trajectories)
    parameters = sum(p.numel() for p in policy.parameters())
    times = []
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mesh is None):
        for index in range(6):
            torch.cuda.synchronize()
            start = time.perf_counter()
            learner.step(trajectories)
            torch.cuda.synchronize()
            if index >= 2:
                times.append(time.perf_counter() - start)
    seconds = percentile(times, 50)
    # Policy forward+backward (6N) + critic forward for values (2N) + 2 critic steps (12N) per token.
    flops = (6 + 2 + 12) * parameters * tokens
    report(
        "bench.perf.learner_step --gpu (0.5B, bf16)",
        {
            "parameters": parameters,
            "tokens_per_step": tokens,
            "tokens_per_s": tokens / seconds,
            "mfu": flops / seconds / (args.peak_tflops * 1e12),
            "peak_tflops": args.peak_tflops,
            "gpu": torch.cuda.get_device_name(),
        },
        args.json,
    )
    if mesh is not None:  # under torchrun: every rank leaves the process group together
        distributed.exit_rank()


def main() -> None:
    from sandboxes.console import setup_logging

    setup_logging()
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m bench.perf.learner_step",
        description="The learner's SAO step against a plain PyTorch loop doing the same model work "
        "(policy forward/backward/AdamW, the critic's passes) on the same batch of synthetic "
        "episodes, interleaved in one run: tokens per second and their ratio (target >= 0.85 on "
        "CPU), and the time to publish the learner's weights to an hf engine. Takes about 1-2 "
        "minutes on 2 cores. `--gpu`: a 0.5B model in bf16 on CUDA, tokens/s and MFU (run by "
        "`make gpu-check`).",
        epilog="example: python -m bench.perf.learner_step",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="where to write the figures (default: bench/results/learner_step.json, with --gpu learner_step_gpu.json)",
    )
    parser.add_argument("--gpu", action="store_true", help="0.5B model on CUDA: tokens/s and MFU")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="the GPU's dense bf16 peak (H100/H200: 989)")
    args = parser.parse_args()
    if args.gpu:
        args.json = args.json or RESULTS / "learner_step_gpu.json"
        return gpu_main(args)
    args.json = args.json or RESULTS / "learner_step.json"
    torch.set_num_threads(max(1, torch.get_num_threads()))
    trajectories = episodes(count=8, turns=4, action_tokens=48, observation_tokens=64)
    tokens = sum(len(t) for t in trajectories)

    policy, critic = make_models()
    optim = LearnerConfig(lr=1e-4, critic_lr=1e-4, token_budget=1 << 20)
    learner = Learner(policy, critic, pad_id=0, algorithm=resolve_algorithm(AlgorithmConfig()), optim=optim)
    base_policy, base_critic = make_models()
    base_policy_opt = torch.optim.AdamW(base_policy.parameters(), lr=1e-4)
    base_critic_opt = torch.optim.AdamW(base_critic.parameters(), lr=1e-4)
    batch = padded_batch(trajectories, 0)

    learner_s, baseline_s = [], []
    for round_index in range(ROUNDS + 2):  # two warm-up rounds
        start = time.perf_counter()
        learner.step(trajectories)
        learner_time = time.perf_counter() - start
        start = time.perf_counter()
        baseline_step(base_policy, base_critic, base_policy_opt, base_critic_opt, batch, learner.algorithm.critic_steps)
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

    masked_s, causal_s = padding_mask_rounds()

    tokens_per_s = tokens / percentile(learner_s, 50)
    baseline_tokens_per_s = tokens / percentile(baseline_s, 50)
    report(
        "bench.perf.learner_step (tiny model, CPU)",
        {
            "tokens_per_step": tokens,
            "tokens_per_s": tokens_per_s,
            "baseline_tokens_per_s": baseline_tokens_per_s,
            "ratio": tokens_per_s / baseline_tokens_per_s,
            "weight_sync_ms": percentile(sync_ms, 50),
            "rounds": ROUNDS,
            "padded_fwd_bwd_s_with_mask": percentile(masked_s, 50),
            "padded_fwd_bwd_s_causal": percentile(causal_s, 50),
            "causal_speedup": percentile(masked_s, 50) / percentile(causal_s, 50),
        },
        args.json,
    )


if __name__ == "__main__":
    main()
