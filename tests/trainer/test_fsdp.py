"""FSDP2 on CPU: two gloo ranks under torchrun take the same step as one plain process,
and their sharded checkpoint loads on a different number of ranks."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.trainer.fsdp_worker import fixed_batch, make_learner
from trainer.learner import pack_by_tokens

ROOT = Path(__file__).parents[2]


def test_pack_by_tokens():
    lengths = [10, 50, 20, 20, 5, 90]
    batches = pack_by_tokens(lengths, budget=60)
    assert sorted(i for b in batches for i in b) == list(range(6))
    for batch in batches:
        assert max(lengths[i] for i in batch) * len(batch) <= 60 or len(batch) == 1
    assert batches[0] == [5]  # longest first; over budget alone


def run_two_ranks(out: Path, *arguments: str, module: str = "tests.trainer.fsdp_worker") -> Path:
    """`module` on two gloo ranks under torchrun, writing to `out`. The port is probed free
    (torchrun's --master_port=0 hangs in rendezvous), so another process can take it before
    torchrun binds it: that failure, and only that one, is tried again on a new port."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    for _ in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={port}",
                   "--master_addr=127.0.0.1", "-m", module, str(out), *arguments]  # fmt: skip
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        if result.returncode == 0 or "EADDRINUSE" not in result.stderr:
            break
    assert result.returncode == 0, result.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory) -> Path:
    return run_two_ranks(tmp_path_factory.mktemp("fsdp"))


@pytest.mark.slow
def test_two_ranks_match_one_process(two_rank_run):
    sharded = torch.load(two_rank_run / "after_step.pt", weights_only=True)
    learner = make_learner()
    metrics = learner.step(fixed_batch()).metrics
    assert metrics["micro_batches"] > 1
    assert abs(metrics["policy_loss"] - sharded["metrics"]["policy_loss"]) < 1e-5
    assert abs(metrics["value_loss"] - sharded["metrics"]["value_loss"]) < 1e-5
    single = learner.full_policy_state()
    assert single.keys() == sharded["policy"].keys()
    for name, tensor in single.items():
        assert torch.allclose(tensor, sharded["policy"][name], atol=1e-5), name


@pytest.mark.slow
def test_two_ranks_report_every_trajectorys_advantage(two_rank_run):
    """Each rank computes the advantages of its own share; the step gathers all of them, so
    rank 0 (whose answer the learner group returns) knows every trajectory's."""
    sharded = torch.load(two_rank_run / "after_step.pt", weights_only=True)["advantages"]
    single = make_learner().step(fixed_batch()).advantages
    assert list(single) == list(sharded) == [f"j{i}" for i in range(5)]
    assert all(value != 0.0 for value in single.values())
    for key, value in single.items():
        assert abs(value - sharded[key]) < 1e-5, key


@pytest.mark.slow
def test_sharded_checkpoint_loads_on_one_rank(two_rank_run):
    learner = make_learner()
    state = learner.load(two_rank_run / "checkpoint")
    assert state["version"] == 1
    sharded = torch.load(two_rank_run / "after_step.pt", weights_only=True)["policy"]
    for name, tensor in learner.full_policy_state().items():
        assert torch.equal(tensor, sharded[name]), name
    # The exported Hugging Face folder holds the same weights.
    from transformers import AutoModelForCausalLM

    exported = AutoModelForCausalLM.from_pretrained(two_rank_run / "checkpoint" / "policy").state_dict()
    for name, tensor in sharded.items():
        assert torch.equal(exported[name], tensor), name
