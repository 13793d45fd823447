"""Micro-batches for the learner: packing, padding, each rank's share and each loss's weight.

Launched by `torchrun`, each rank takes every world-size-th trajectory of a batch. On each
rank, trajectories are packed into micro-batches by a token budget (longest first) and
gradients accumulate over them; every micro-batch's loss is weighted (`loss_weight`) so the
sum over micro-batches and ranks is exactly the loss over the whole global batch. Ranks run
the same number of micro-batches (padding with empty ones) because each FSDP forward is a
collective.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainer import distributed
from trainer.inference.trajectory import Trajectory
from trainer.learner.tree import build_prefix_tree, common_prefix, is_packed, tree_tensors


@dataclass(frozen=True)
class MicroBatch:
    """Trajectories trained on together, as right-padded [B, T] tensors (`padded_batch`)."""

    indices: list[int]
    """Each row's position in the step's list of trajectories (empty: a padding batch)."""
    trajectories: list[Trajectory]
    tensors: dict[str, torch.Tensor]


@dataclass(frozen=True)
class Totals:
    """Global counts (all ranks) the losses average over."""

    tokens: float
    """Policy tokens."""
    sequences: float
    """Sequences with at least one policy token."""


@dataclass(frozen=True)
class PreparedBatch:
    """This rank's micro-batches of one step and the global totals."""

    micro_batches: list[MicroBatch]
    totals: Totals
    horizon: int | None = None
    """Dr.GRPO's constant divisor for `sequence_sum_norm`: the longest sequence of the
    whole batch (all ranks) minus one; None for the other aggregations."""

    @property
    def model_tokens(self) -> int:
        """Tokens one forward pass over this rank's micro-batches runs through the model:
        padded rows flat, distinct prefixes packed (padding micro-batches left out)."""
        return sum(
            int((m.tensors["tree_ids"] if is_packed(m.tensors) else m.tensors["input_ids"]).numel())
            for m in self.micro_batches
            if m.trajectories
        )


def pack_by_tokens(lengths: list[int], budget: int) -> list[list[int]]:
    """Group sequence indices into micro-batches whose padded size (longest x count) fits
    `budget` tokens, longest first. A sequence longer than the budget gets its own."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for index in order:
        if batches and lengths[batches[-1][0]] * (len(batches[-1]) + 1) <= budget:
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches


def padded_batch(
    trajectories: list[Trajectory], pad_id: int, device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Right-padded [B, T] tensors; per-token fields are shifted to align with targets."""
    length = max(len(t) for t in trajectories)
    size = len(trajectories)
    input_ids = torch.full((size, length), pad_id, dtype=torch.long)
    attention = torch.zeros((size, length), dtype=torch.long)
    policy = torch.zeros((size, length), dtype=torch.bool)
    rollout_logp = torch.zeros((size, length), dtype=torch.float32)
    for row, traj in enumerate(trajectories):
        n = len(traj)
        input_ids[row, :n] = torch.tensor(traj.token_ids)
        attention[row, :n] = 1
        policy[row, :n] = torch.tensor(traj.policy_mask)
        rollout_logp[row, :n] = torch.tensor(traj.logprobs)
    batch = {
        "input_ids": input_ids,
        "attention_mask": attention,
        # Token t+1 is predicted at position t: everything below is indexed by target.
        "policy_mask": policy[:, 1:],
        "rollout_logp": rollout_logp[:, 1:],
    }
    return {k: v.to(device) for k, v in batch.items()}


def empty_batch(pad_id: int, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """A two-token micro-batch with no policy token: keeps ranks' collectives in step."""
    return {
        "input_ids": torch.full((1, 2), pad_id, dtype=torch.long, device=device),
        "attention_mask": torch.ones((1, 2), dtype=torch.long, device=device),
        "policy_mask": torch.zeros((1, 1), dtype=torch.bool, device=device),
        "rollout_logp": torch.zeros((1, 1), device=device),
    }


def rank_share(count: int) -> list[int]:
    """Indices of this rank's trajectories among `count`: every world-size-th one."""
    return list(range(count))[distributed.rank() :: distributed.world_size()]


def prefix_share(sequences: list[list[int]]) -> list[int]:
    """Indices of this rank's sequences for tree packing: the sequences sorted by their tokens,
    cut into one contiguous run per rank (as even in count as `rank_share`), so sequences that
    share a prefix stay together."""
    order = sorted(range(len(sequences)), key=lambda i: sequences[i])
    rank, world = distributed.rank(), distributed.world_size()
    return order[rank * len(order) // world : (rank + 1) * len(order) // world]


def pack_by_prefix(sequences: list[list[int]], budget: int) -> list[list[int]]:
    """Group sequences, in the order given (sorted: `prefix_share`), into micro-batches whose
    packed prefix tree holds at most `budget` tokens: each sequence costs its tokens after
    the prefix it shares with the one before it. A sequence longer than the budget gets its own."""
    batches: list[list[int]] = []
    packed = 0
    for position, sequence in enumerate(sequences):
        cost = len(sequence) - (common_prefix(sequences[position - 1], sequence) if batches else 0)
        if batches and packed + cost <= budget:
            batches[-1].append(position)
            packed += cost
        else:
            batches.append([position])
            packed = len(sequence)
    return batches


def prepare(
    trajectories: list[Trajectory],
    *,
    pad_id: int,
    token_budget: int,
    device: torch.device | str = "cpu",
    aggregation: str = "token_mean",
    tree: bool = False,
) -> PreparedBatch:
    """This rank's share, packed by token budget and padded to the ranks' common count,
    and the global (policy tokens, sequences with policy tokens) the losses average over.

    With `tree`, each micro-batch is also a packed prefix tree (`trainer.learner.tree`): the
    rank's share keeps sequences with shared prefixes together (`prefix_share`) and the
    budget counts packed tokens (`pack_by_prefix`)."""
    share = prefix_share([t.token_ids for t in trajectories]) if tree else rank_share(len(trajectories))
    local = [trajectories[i] for i in share]
    if tree:
        groups = pack_by_prefix([t.token_ids for t in local], token_budget)
    else:
        groups = pack_by_tokens([len(t) for t in local], token_budget)
    micro_batches = []
    for group in groups:
        rows = [local[i] for i in group]
        tensors = padded_batch(rows, pad_id, device)
        if tree:
            tree_of_rows = build_prefix_tree([t.token_ids for t in rows])
            tensors |= tree_tensors(tree_of_rows, tensors["input_ids"].shape[1], device)
        micro_batches.append(MicroBatch([share[i] for i in group], rows, tensors))
    count = int(distributed.all_reduce(len(micro_batches), "max"))
    micro_batches += [MicroBatch([], [], empty_batch(pad_id, device))] * (count - len(micro_batches))
    totals = Totals(
        tokens=distributed.all_reduce(sum(t.num_policy_tokens for t in local)),
        sequences=distributed.all_reduce(sum(1 for t in local if t.num_policy_tokens)),
    )
    horizon = None
    if aggregation == "sequence_sum_norm":  # one horizon for the whole batch
        horizon = int(distributed.all_reduce(max(len(t) for t in trajectories) - 1, "max"))
    return PreparedBatch(micro_batches, totals, horizon)


def loss_weight(tensors: dict[str, torch.Tensor], totals: Totals, aggregation: str) -> float:
    """This micro-batch's share of the global loss. FSDP averages gradients over ranks,
    so shares are scaled by the world size to make the result the global mean."""
    if aggregation == "token_mean":  # sequence_mean and sequence_sum_norm: per sequence
        share = float(tensors["policy_mask"].sum()) / max(totals.tokens, 1.0)
    else:
        share = float((tensors["policy_mask"].sum(-1) > 0).sum()) / max(totals.sequences, 1.0)
    return share * distributed.world_size()


def token_means(values: torch.Tensor, mask: torch.Tensor) -> list[float]:
    """Each row's mean of `values` [B, T] over its `mask`ed tokens (0 for a row with none)."""
    mask = mask.float()
    return ((values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).tolist()
