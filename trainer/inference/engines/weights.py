"""Versioned, bucketed, checksummed weight updates from the learner to the engines.

The learner cuts its full state into buckets of at most `bucket_bytes`, each carrying the
policy version, its place in the update, and a BLAKE2 checksum of its bytes. An engine
applies an update only when every bucket of that version has arrived intact; a torn or
corrupted update raises `WeightSyncError` and leaves the engine on its previous version.
Buckets bound peak memory on the receiving side and map onto NCCL broadcasts at scale.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch


class WeightSyncError(RuntimeError):
    pass


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    # Reinterpret as bytes, so bf16 (which numpy cannot hold) hashes like any dtype.
    return tensor.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()


def checksum(names: list[str], tensors: list[torch.Tensor]) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in zip(names, tensors, strict=True):
        digest.update(name.encode() + str(tuple(tensor.shape)).encode() + str(tensor.dtype).encode())
        digest.update(_tensor_bytes(tensor))
    return digest.hexdigest()


@dataclass(frozen=True)
class WeightBucket:
    version: int
    index: int
    total: int
    names: list[str]
    tensors: list[torch.Tensor]
    checksum: str

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors)


def make_buckets(state: dict[str, torch.Tensor], version: int, bucket_bytes: int = 256 << 20) -> list[WeightBucket]:
    """Cut `state` into buckets of at most `bucket_bytes` (a larger tensor goes alone)."""
    groups: list[list[str]] = [[]]
    size = 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if groups[-1] and size + nbytes > bucket_bytes:
            groups.append([])
            size = 0
        groups[-1].append(name)
        size += nbytes
    buckets = []
    for index, names in enumerate(groups):
        tensors = [state[n].detach().cpu() for n in names]
        buckets.append(WeightBucket(version, index, len(groups), names, tensors, checksum(names, tensors)))
    return buckets


def assemble(buckets: list[WeightBucket], current_version: int | None = None) -> tuple[int, dict[str, torch.Tensor]]:
    """Check an update's buckets (one version, all present once, checksums intact, newer than
    the receiver's `current_version` unless that is the initial 0) and return (version, state)."""
    if not buckets:
        raise WeightSyncError("empty weight update")
    versions = {b.version for b in buckets}
    if len(versions) != 1:
        raise WeightSyncError(f"weight update mixes versions {sorted(versions)}")
    if current_version and buckets[0].version <= current_version:
        raise WeightSyncError(f"weight update v{buckets[0].version} is not newer than the engine's v{current_version}")
    total = buckets[0].total
    indices = sorted(b.index for b in buckets)
    if indices != list(range(total)):
        raise WeightSyncError(f"weight update v{buckets[0].version} has buckets {indices}, expected 0..{total - 1}")
    state: dict[str, torch.Tensor] = {}
    for bucket in sorted(buckets, key=lambda b: b.index):
        if checksum(bucket.names, bucket.tensors) != bucket.checksum:
            raise WeightSyncError(f"weight update v{bucket.version}: bucket {bucket.index} failed its checksum")
        state.update(zip(bucket.names, bucket.tensors, strict=True))
    return buckets[0].version, state
