"""Process groups and FSDP2 sharding for the learner.

Launched by `torchrun`, the learner joins a process group (gloo on CPU, NCCL on GPU) and
shards the policy and the critic with FSDP2 (`fully_shard`): each decoder layer is its own
unit, then the root. Run as a plain process, nothing is sharded and every helper here
degrades to the single-process answer, so the same learner code serves both.

A learner pool (`trainer.orchestrator.learner_group`, BiDiRL's in-place resize) keeps more
processes in one process group than the learner uses: the learner of `k` ranks lives on a
subgroup of the first `k` (`use_group`), and every helper here (ranks, reductions, barriers,
the checkpoint's collectives through `group()`) then speaks to that subgroup only, so the
processes outside it can wait idle without a collective ever waiting on them.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import torch
import torch.distributed as dist
from torch import nn


def init_from_env():
    """Join the process group `torchrun` describes and return a 1-D device mesh, or None
    when this process was not launched by `torchrun`."""
    if "WORLD_SIZE" not in os.environ:
        return None
    from torch.distributed.device_mesh import init_device_mesh

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return init_device_mesh("cuda" if cuda else "cpu", (dist.get_world_size(),))


_group = None
"""The process group the learner's collectives use (None: the default group)."""


def use_group(group) -> None:
    """Make `group` (a subgroup of the default group, or None for the default group itself)
    the one every helper here uses; a learner pool sets it before building a learner."""
    global _group
    _group = group


def group():
    """The process group of the learner's collectives (None: the default group); pass it to
    torch.distributed calls made outside this module."""
    return _group


def rank() -> int:
    return dist.get_rank(_group) if dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size(_group) if dist.is_initialized() else 1


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier(group=_group)


def exit_rank(code: int = 0) -> NoReturn:
    """End a rank that `torchrun` launched: wait for every rank, leave the process group, and
    exit without finalizing the interpreter.

    A plain return is not safe on CPU. Gloo's worker threads free finished collectives on
    their own schedule, and freeing one whose tensors Python has let go of (FSDP2's
    all-gathers) takes the GIL. If that lands while the interpreter finalizes, Python kills
    the thread inside a C++ destructor and the rank aborts with "terminate called without an
    active exception" (seen under gdb in `~AsyncAllgatherCoalescedWork`, in about 1 run of
    the two-rank test in 6; pytorch/pytorch#179291 describes the same crash).
    `destroy_process_group` does not end those threads while a DeviceMesh or FSDP2's state
    still holds the group, so the rank leaves with `os._exit` once its output is flushed.
    Whatever must outlive the rank (checkpoints, results) has to be written before this.
    """
    barrier()
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def all_reduce(value: float, op: str = "sum") -> float:
    """The sum (or max) of a Python number over all ranks."""
    if not dist.is_initialized():
        return value
    tensor = torch.tensor([float(value)], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        tensor = tensor.cuda()
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM, group=_group)
    return float(tensor.item())


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The transformer blocks of a Hugging Face decoder (one FSDP unit each)."""
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]


def shard(model: nn.Module, mesh, *, bf16: bool = False) -> nn.Module:
    """FSDP2-shard `model` over `mesh` (layer by layer, then the root); a no-op without a mesh.

    With `bf16`, parameters are all-gathered and computed in bfloat16 while gradients are
    reduced in float32 (the usual mixed-precision recipe on GPUs).
    """
    if mesh is None:
        return model
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else None
    kwargs = {"mesh": mesh, **({"mp_policy": policy} if policy else {})}
    for layer in decoder_layers(model):
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model
