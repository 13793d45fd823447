"""Tree training: a micro-batch's shared prefixes computed once (issue #22).

PATR's trees share prefixes at generation time (the engine reuses their KV cache), and even
independent episodes share the system prompt and the tool schemas. A flat micro-batch runs
every sequence in full, so a prefix shared by k sequences is computed k times. Here the
sequences of a micro-batch are merged into a token trie (`build_prefix_tree`): each distinct
prefix becomes one packed token, laid out in one row in depth-first order, and the model
runs once on that row with

- an attention mask that lets each packed token see exactly its ancestors on the trie (its
  own sequence's earlier tokens, wherever they are packed): `ancestor_mask`;
- position ids equal to each token's depth, so rotary embeddings are those of the flat run.

Each sequence's outputs are then gathered back by index (`PrefixTree.index`) into the flat
layout [B, T, ...], so the losses, advantages and metrics downstream are the flat
computation's (equal up to float summation order: tested to 1e-5, for the policy, the
critic and SAPO, and under FSDP). The attention runs dense with a boolean mask (SDPA: its
CPU and GPU kernels take a mask without materialising the scores), so its cost grows with
the square of the packed length; the linear layers and the vocabulary projection, which
dominate a real model's cost per token, run once per distinct prefix. `python -m bench.perf.tree`
measures both (tokens processed and seconds per learner step, tree against flat).

Departures from a full tree-attention kernel (e.g. FlexAttention's block-sparse masks):
masked blocks are still computed, so the gain on a tiny model, whose cost is mostly
attention, is smaller than on a large one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PrefixTree:
    """Sequences merged on their shared prefixes (`build_prefix_tree`)."""

    token_ids: list[int]
    """The packed row: one token per distinct prefix, in depth-first (lexicographic) order."""
    positions: list[int]
    """Each packed token's depth: its position in every sequence that goes through it."""
    subtree_end: list[int]
    """One past the last packed index below each token: token j is an ancestor of token i
    (or i itself) exactly when j <= i < subtree_end[j]."""
    index: list[list[int]]
    """Per sequence (input order), the packed index of each of its positions."""


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    limit = min(len(a), len(b))
    if limit == 0:
        return 0
    left = torch.tensor(a[:limit])
    differ = (left != torch.tensor(b[:limit])).nonzero()
    return int(differ[0]) if len(differ) else limit


def build_prefix_tree(sequences: list[list[int]]) -> PrefixTree:
    """The token trie of `sequences`, packed in depth-first order.

    Sorted lexicographically, each sequence's longest common prefix with any earlier one is
    its common prefix with the one just before it; so one pass over the sorted sequences adds,
    for each, only the tokens after that prefix, as children of the prefix's last token.
    Appending in sorted order lays the trie out in preorder, so every subtree is a contiguous
    range of the packed row."""
    order = sorted(range(len(sequences)), key=lambda i: sequences[i])
    token_ids: list[int] = []
    positions: list[int] = []
    parents: list[int] = []
    index: list[list[int]] = [[] for _ in sequences]
    previous: list[int] = []
    previous_path: list[int] = []
    for i in order:
        sequence = sequences[i]
        shared = common_prefix(previous, sequence)
        path = previous_path[:shared]
        for depth in range(shared, len(sequence)):
            parents.append(path[-1] if path else -1)
            path.append(len(token_ids))
            token_ids.append(sequence[depth])
            positions.append(depth)
        index[i] = path
        previous, previous_path = sequence, path
    subtree_end = list(range(1, len(token_ids) + 1))
    for node in range(len(token_ids) - 1, -1, -1):  # children come after their parent
        parent = parents[node]
        if parent >= 0:
            subtree_end[parent] = max(subtree_end[parent], subtree_end[node])
    return PrefixTree(token_ids, positions, subtree_end, index)


def ancestor_mask(subtree_end: torch.Tensor) -> torch.Tensor:
    """[N, N] boolean: row i may attend to column j when j is i or one of its ancestors."""
    packed = torch.arange(len(subtree_end), device=subtree_end.device)
    return (packed[None, :] <= packed[:, None]) & (packed[:, None] < subtree_end[None, :])


def tree_tensors(tree: PrefixTree, length: int, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """The packed row's model inputs and the gather index back to a [B, `length`] layout
    (padding positions point at packed token 0; their outputs are masked downstream)."""
    index = torch.zeros((len(tree.index), length), dtype=torch.long)
    for row, path in enumerate(tree.index):
        index[row, : len(path)] = torch.tensor(path, dtype=torch.long)
    subtree_end = torch.tensor(tree.subtree_end, dtype=torch.long)
    tensors = {
        "tree_ids": torch.tensor([tree.token_ids], dtype=torch.long),
        "tree_positions": torch.tensor([tree.positions], dtype=torch.long),
        "tree_mask": ancestor_mask(subtree_end)[None, None],
        "tree_index": index,
    }
    return {k: v.to(device) for k, v in tensors.items()}


def is_packed(tensors: dict[str, torch.Tensor]) -> bool:
    """Whether a micro-batch carries a packed prefix tree (`tree_tensors`)."""
    return "tree_ids" in tensors


def packed_inputs(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keyword arguments for a Hugging Face model (or a `ValueModel`) on the packed row."""
    return {
        "input_ids": tensors["tree_ids"],
        "attention_mask": tensors["tree_mask"],
        "position_ids": tensors["tree_positions"],
    }


def unpack(packed: torch.Tensor, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-sequence outputs [B, T, ...] from the packed row's [1, N, ...]."""
    return packed[0][tensors["tree_index"]]
