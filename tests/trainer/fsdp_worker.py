"""Run by `torchrun` from test_fsdp.py: one SAO step on a fixed batch, FSDP2-sharded, then a
checkpoint. The same batch is stepped in one plain process by the test, to compare.
With a second argument `tree`: the same on test_tree_training's PATR batch, tree-packed."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from trainer import distributed
from trainer.config import AlgorithmConfig, LearnerConfig
from trainer.inference.models import ValueModel, load_policy
from trainer.inference.trajectory import Trajectory
from trainer.learner import Learner, token_logprobs
from trainer.resolve import resolve_algorithm

LENGTHS = [(9, 5, 3, 4), (6, 7, 2, 6), (12, 3, 4, 2), (5, 4, 3, 5), (8, 6, 2, 3)]
REWARDS = [1.0, 0.0, 1.0, 1.0, 0.0]


def fixed_batch() -> list[Trajectory]:
    """Five trajectories of two actions each, scored by a reference policy (seed 5), so the
    learner (seed 0) sees ratios away from 1 and some masked tokens."""
    reference = load_policy("tiny", seed=5)
    generator = torch.Generator().manual_seed(0)
    batch = []
    for index, ((prompt, a1, obs, a2), reward) in enumerate(zip(LENGTHS, REWARDS, strict=True)):
        parts = [torch.randint(5, 2000, (n,), generator=generator).tolist() for n in (prompt, a1, obs, a2)]
        ids = torch.tensor([sum(parts, [])])
        with torch.no_grad():
            logp = token_logprobs(reference, ids, torch.ones_like(ids))[0].tolist()
        traj = Trajectory(task_id=f"t{index}", reward=reward, terminated=True, trajectory_id=f"j{index}")
        for part, is_policy in zip(parts, (False, True, False, True), strict=True):
            start = len(traj)
            traj.extend(part, policy=is_policy, logprobs=logp[start - 1 : start - 1 + len(part)] if is_policy else None)
        batch.append(traj)
    return batch


def make_learner(mesh=None, tree: bool = False) -> Learner:
    policy = load_policy("tiny", seed=0)
    critic = ValueModel.from_policy(policy)
    torch.manual_seed(1)
    torch.nn.init.normal_(critic.head.weight, std=0.1)
    # A small token budget forces several micro-batches, and unequal counts across ranks
    # (tree-packed: room for two or three of the PATR batch's episodes, ~45 tokens each).
    optim = LearnerConfig(lr=1e-3, critic_lr=1e-3, token_budget=100 if tree else 40, tree_packing=tree)
    return Learner(
        policy, critic, pad_id=0, algorithm=resolve_algorithm(AlgorithmConfig(name="sao")), optim=optim, mesh=mesh
    )


def main(out: Path, tree: bool) -> None:
    mesh = distributed.init_from_env()
    learner = make_learner(mesh, tree)
    if tree:
        from tests.trainer.test_tree_training import patr_batch

        result = learner.step(patr_batch())
    else:
        result = learner.step(fixed_batch())
    learner.save(out / "checkpoint", extra={"metrics": result.metrics})
    state = learner.full_policy_state()
    if distributed.rank() == 0:
        torch.save({"policy": state, "metrics": result.metrics, "advantages": result.advantages}, out / "after_step.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]), tree=sys.argv[2:] == ["tree"])
    distributed.exit_rank()
