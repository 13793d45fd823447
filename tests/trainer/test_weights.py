import pytest
import torch

from trainer.inference.engines.hf import HFEngine
from trainer.inference.engines.weights import WeightSyncError, assemble, make_buckets
from trainer.inference.models import load_policy


def test_buckets_round_trip_within_the_size_limit():
    state = load_policy("tiny", seed=0).state_dict()
    buckets = make_buckets(state, version=3, bucket_bytes=64 << 10)
    assert len(buckets) > 1
    largest = max(t.numel() * t.element_size() for t in state.values())
    assert all(b.nbytes <= max(64 << 10, largest) for b in buckets)
    version, rebuilt = assemble(buckets)
    assert version == 3 and rebuilt.keys() == state.keys()
    assert all(torch.equal(rebuilt[k], state[k]) for k in state)


def test_torn_mixed_or_corrupted_updates_are_refused():
    state = load_policy("tiny", seed=0).state_dict()
    buckets = make_buckets(state, version=2, bucket_bytes=64 << 10)
    with pytest.raises(WeightSyncError, match="expected 0.."):
        assemble(buckets[:-1])
    with pytest.raises(WeightSyncError, match="mixes versions"):
        assemble(buckets[:-1] + make_buckets(state, version=3, bucket_bytes=64 << 10)[-1:])
    buckets[1].tensors[0].view(-1)[0] += 1.0  # a flipped value in transit
    with pytest.raises(WeightSyncError, match="bucket 1 failed its checksum"):
        assemble(buckets)


def test_engine_keeps_its_weights_when_an_update_fails():
    engine = HFEngine(load_policy("tiny", seed=0))
    before = {k: v.clone() for k, v in engine.model.state_dict().items()}
    new = load_policy("tiny", seed=1).state_dict()
    buckets = make_buckets(new, version=1, bucket_bytes=64 << 10)
    with pytest.raises(WeightSyncError):
        engine.update_weights(buckets[:-1])
    assert engine.version == 0
    assert all(torch.equal(before[k], v) for k, v in engine.model.state_dict().items())
    engine.update_weights(buckets)
    assert engine.version == 1
    assert all(torch.equal(new[k], v) for k, v in engine.model.state_dict().items())
    with pytest.raises(WeightSyncError, match="not newer"):
        engine.update_weights(make_buckets(new, version=1))
