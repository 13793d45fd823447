"""The learner group: `ranks` Ray actors that together are one FSDP2 learner.

Each actor is one rank of a torch.distributed process group (gloo on CPU, NCCL on GPU) and
holds its shard of the policy and critic (`trainer.learner.Learner`). Every call goes to all
ranks with the same arguments (each rank takes every world-size-th trajectory of a batch,
and every collective needs all ranks); rank 0's answer is returned. One rank on CPU makes no
process group and shards nothing; one rank with a GPU makes a one-rank NCCL group, so the
learner lives on its GPU (FSDP2's bf16 mixed precision included) as it does with several.

Resizing (BiDiRL's hot switch, arXiv 2607.09207): between two steps `resize(ranks)` moves
the learner's whole training state to `ranks` ranks, so units lent by the rollout pool can
join it and leave it again. The state is gathered unsharded on rank 0, in memory
(`trainer.learner.checkpoint.export_state`: the checkpoint's state-dict helpers without the
files), and each rank of the new size keeps its shards of it (`import_state`).

With a `pool` (what a multiplexed run uses) the move is in place, as in BiDiRL: `pool` rank
processes start once, join one process group and make its subgroups of the first 1..pool
ranks; a learner of `k` ranks is built on the first `k` over their subgroup
(`trainer.distributed.use_group`), and the others wait idle, holding no weights or
optimizer state (BiDiRL offloads to host memory; here the state waits in Ray's object store
during the move). A resize frees the learner, builds it at the new size and loads the
state: no process starts or ends, and no process group is torn down inside a live process
(not reliably safe: `trainer.distributed.exit_rank`). Without a pool, a resize ends the old
ranks' actors and starts new ones (cold: seconds to start a process and import torch).

The learner's API is `Learner`'s own, written once: `group.call(Learner.warm_start_steps, 5)`
runs that method on every rank's learner (`LearnerRank.call`) and returns rank 0's answer,
`group.call_ref(...)` rank 0's reference without waiting. The method travels as the
function object (Ray pickles it by reference), so a new learner method needs no forward
here; what remains on the ranks and the group is about ranks (start, join, resize) and the
save that the driver publishes.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainer.config import TrainConfig
from trainer.inference.trajectory import Trajectory

if TYPE_CHECKING:
    from trainer.learner import Learner, StepResult

logger = logging.getLogger(__name__)

LearnerMethod = Callable[..., Any] | property
"""A method of `Learner`, unbound (`Learner.step`), or a function whose first parameter is
the learner (`timed_step`); or one of its properties (`Learner.version`), read."""


def timed_step(learner: Learner, trajectories: list[Trajectory]) -> StepResult:
    """`Learner.step` with the seconds it took on the rank added to its metrics
    (`learner_seconds`, what the multiplexing profile reads): the driver sees only when
    the result arrived."""
    started = time.monotonic()
    result = learner.step(trajectories)
    result.metrics["learner_seconds"] = round(time.monotonic() - started, 4)
    return result


class LearnerRank:
    def __init__(self, config: dict, rank: int, world_size: int, threads: int) -> None:
        """Nothing heavy yet: rank 0 first names the rendezvous address on its own node
        (`rendezvous`), then every rank joins it (`setup`)."""
        self.config_payload, self.rank, self.world_size, self.threads = config, rank, world_size, threads

    def rendezvous(self) -> str:
        """host:port for the process group, on this rank's node (rank 0's): its address on the
        cluster's network, so ranks on other nodes reach it, and a port free there."""
        import socket

        import ray

        with socket.socket() as sock:
            sock.bind(("", 0))
            port = sock.getsockname()[1]
        return f"{ray.util.get_node_ip_address()}:{port}"

    def setup(self, address: str) -> None:
        """Join the process group at `address` (when sharded or on a GPU) and build the learner."""
        import torch

        config, rank, world_size = self.config_payload, self.rank, self.world_size
        torch.set_num_threads(self.threads)  # Ray starts actors with one thread; the learner wants the cores
        mesh = None
        if world_size > 1 or torch.cuda.is_available():  # the learner moves to CUDA only with a mesh
            host, port = address.rsplit(":", 1)
            os.environ.update(MASTER_ADDR=host, MASTER_PORT=port, RANK=str(rank), WORLD_SIZE=str(world_size))
            os.environ["LOCAL_RANK"] = "0"  # Ray gives each actor its own GPU (CUDA_VISIBLE_DEVICES)
            from trainer import distributed

            mesh = distributed.init_from_env()
        from trainer.build import build_learner

        self.config = TrainConfig.model_validate(config)
        self.rank = rank
        self.learner, self.tokenizer = build_learner(self.config, mesh=mesh)

    def join(self, address: str, size: int) -> None:
        """Join a learner pool: the process group of its `size` processes at `address`, and its
        subgroups of the first 1..`size` ranks (`activate`'s; every process of the group must
        make each of them, in the same order)."""
        import torch
        import torch.distributed as dist

        cuda = torch.cuda.is_available()
        host, port = address.rsplit(":", 1)
        os.environ.update(MASTER_ADDR=host, MASTER_PORT=port, RANK=str(self.rank), WORLD_SIZE=str(size))
        if cuda:
            torch.cuda.set_device(0)  # Ray gives each actor its own GPU (CUDA_VISIBLE_DEVICES)
        dist.init_process_group("nccl" if cuda else "gloo")
        self.subgroups = {k: dist.new_group(list(range(k))) for k in range(1, size + 1)}
        self.learner = None

    def activate(self, ranks: int, threads: int) -> bool:
        """Be rank `self.rank` of a learner of `ranks` ranks built on the subgroup of the
        pool's first `ranks` processes (FSDP2 over it when more than one, or on a GPU); a
        process outside it stays idle. Returns whether this one holds a learner."""
        import torch
        from torch.distributed.device_mesh import DeviceMesh

        from trainer import distributed
        from trainer.build import build_learner

        self.deactivate()
        if self.rank >= ranks:
            return False
        group = self.subgroups[ranks]
        distributed.use_group(group)
        torch.set_num_threads(threads)
        cuda = torch.cuda.is_available()
        mesh = DeviceMesh.from_group(group, "cuda" if cuda else "cpu") if ranks > 1 or cuda else None
        self.config = TrainConfig.model_validate(self.config_payload)
        self.learner, self.tokenizer = build_learner(self.config, mesh=mesh)
        return True

    def deactivate(self) -> None:
        """Free this rank's learner (weights, optimizer states, caches); the process and its
        process group stay for the next `activate`."""
        import torch

        self.learner = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def call(self, method: LearnerMethod, *args):
        """`method` on this rank's learner with `args` (a property: read); its answer."""
        if isinstance(method, property):
            return method.fget(self.learner)
        return method(self.learner, *args)

    def write_checkpoint(self, directory: str, extra: dict) -> str:
        """This rank's shards of the checkpoint `directory`, into its staging folder; the
        driver publishes it (`trainer.learner.checkpoint`)."""
        from trainer.learner import checkpoint

        return str(checkpoint.write(self.learner, directory, extra, self.tokenizer))

    def export_state(self) -> dict | None:
        """The whole training state, unsharded (rank 0; None on the others), for `resize`."""
        from trainer.learner import checkpoint

        state = checkpoint.export_state(self.learner)
        if state is not None:
            state["probes"] = self.learner.probes
        return state

    def import_state(self, state: dict) -> int:
        """Take this rank's shards of `export_state`'s state; returns the version."""
        from trainer.learner import checkpoint

        checkpoint.import_state(self.learner, state)
        self.learner.set_probes(state["probes"])
        return self.learner.version


class LearnerGroup:
    """Handles on the ranks' actors. Every call runs on all ranks with the same arguments
    (each collective needs every rank) and returns rank 0's answer; `call_ref` returns rank
    0's Ray object reference instead of waiting, for the orchestrator's event loop."""

    def __init__(self, config: TrainConfig, *, ranks: int = 1, num_gpus: float = 0, pool: int = 0) -> None:
        """`pool`: rank processes kept for the whole run (at least `ranks`), so that `resize`
        moves the learner in place up to that many ranks (module docstring); 0: no pool, a
        resize restarts the rank processes. Each pool process holds its `num_gpus` for the
        run (on a GPU machine a GPU each: units shared with rollout need fractions)."""
        if pool and pool < ranks:
            raise ValueError(f"a learner pool of {pool} processes cannot hold a learner of {ranks} ranks")
        self.payload = config.model_dump()
        self.num_gpus = num_gpus
        self.pool = self._start_pool(pool) if pool else []
        self.ranks = self._activate(ranks) if pool else self._start(ranks)

    def _spawn(self, rank: int, world_size: int, threads: int = 1):
        import ray

        actor = ray.remote(num_cpus=0, num_gpus=self.num_gpus)(LearnerRank)
        return actor.remote(self.payload, rank, world_size, threads)

    def _start_pool(self, size: int) -> list:
        """`size` rank processes in one process group with its subgroups (`LearnerRank.join`)."""
        import ray

        handles = [self._spawn(rank, size) for rank in range(size)]
        address = ray.get(handles[0].rendezvous.remote())
        ray.get([handle.join.remote(address, size) for handle in handles])  # every rank at once: a rendezvous
        return handles

    def _activate(self, ranks: int) -> list:
        """The pool's first `ranks` processes as the learner (`LearnerRank.activate`); waits
        until every pool process has taken its part."""
        import ray

        if not 1 <= ranks <= len(self.pool):
            raise ValueError(
                f"the learner pool has {len(self.pool)} processes: a learner of {ranks} ranks needs 1 to that"
            )
        threads = max(1, (os.cpu_count() or 1) // ranks)
        ray.get([handle.activate.remote(ranks, threads) for handle in self.pool])
        return self.pool[:ranks]

    def _start(self, ranks: int) -> list:
        """`ranks` new rank actors, their setup queued (each rank runs its calls in order)."""
        import ray

        if ranks < 1:
            raise ValueError(f"a learner group needs at least one rank, not {ranks}")
        threads = max(1, (os.cpu_count() or 1) // ranks)
        handles = [self._spawn(rank, ranks, threads) for rank in range(ranks)]
        # Rank 0's node, wherever Ray put it (another node of a cluster: not 127.0.0.1).
        address = ray.get(handles[0].rendezvous.remote())
        for rank in handles:
            rank.setup.remote(address)
        return handles

    def call_ref(self, method: LearnerMethod, *args):
        """Start `method` (`LearnerRank.call`) on every rank; rank 0's reference to its answer."""
        return [rank.call.remote(method, *args) for rank in self.ranks][0]

    def call(self, method: LearnerMethod, *args):
        """`method` on every rank's learner, waited for; rank 0's answer. A warm start (and
        critic pre-training) goes in chunks, for a progress bar between them: `begin_`, then
        `_steps` calls, then `end_`; the batch and optimizer stay on the ranks in between."""
        import ray

        return ray.get([rank.call.remote(method, *args) for rank in self.ranks])[0]

    def save(self, directory: str, extra: dict) -> str:
        """A checkpoint at `directory`: the ranks write their shards into a hidden staging
        folder; once all of them reported, this process (the driver that owns the run) writes
        the manifest and renames the folder into place. A rank left running after its driver
        died never publishes anything."""
        import ray

        from trainer.learner import checkpoint

        checkpoint.prepare(directory)
        ray.get([rank.write_checkpoint.remote(directory, extra) for rank in self.ranks])  # every rank's shards
        return str(checkpoint.publish(directory))

    def resize(self, ranks: int) -> float:
        """Move the learner to `ranks` ranks and wait until it has (`resize_refs`); returns
        the seconds it took (0.0 when it already has that many)."""
        import ray

        started = time.monotonic()
        refs = self.resize_refs(ranks)
        if not refs:
            return 0.0
        ray.get(refs)
        seconds = time.monotonic() - started
        logger.info("learner resized to %d ranks in %.2fs%s", ranks, seconds, " in place" if self.pool else "")
        return seconds

    def resize_refs(self, ranks: int) -> list:
        """Start moving the learner to `ranks` ranks (BiDiRL: units lent by, or returned to,
        the rollout pool); references that are all ready once every new rank holds its
        state ([] when it already has that many ranks). Weights, optimizer states, version
        and counters, SE-RL's family weights, the RNG and the probes carry over, so the next
        step is the step the old group would have taken (up to float rounding of the
        sharded reductions). With a pool (up to its size) nothing here waits: each rank runs
        its calls in order, so a step or weights request sent after this runs on the new
        ranks once they hold the state; without one the new processes start first (module
        docstring). Call it between steps: a step or weights request already sent finishes
        first and its result stays readable; not inside a warm start or critic pre-training."""
        import ray

        if ranks < 1:
            raise ValueError(f"a learner group needs at least one rank, not {ranks}")
        if self.pool and ranks > len(self.pool):
            raise ValueError(f"the learner pool has {len(self.pool)} processes: it cannot grow to {ranks} ranks")
        if ranks == len(self.ranks):
            return []
        state = [rank.export_state.remote() for rank in self.ranks][0]  # every rank gathers; rank 0's is the state
        if self.pool:
            threads = max(1, (os.cpu_count() or 1) // ranks)
            for handle in self.pool:  # after its export: frees the old learner, builds the new
                handle.activate.remote(ranks, threads)
            self.ranks = self.pool[:ranks]
        else:
            ray.wait([state], fetch_local=False)  # the old ranks end only once the state is out
            self._kill(self.ranks)  # the units are free before the new ranks take them
            self.ranks = self._start(ranks)
        return [rank.import_state.remote(state) for rank in self.ranks]

    def kill(self) -> None:
        """End the ranks (and the pool's processes)."""
        self._kill(list(dict.fromkeys([*self.ranks, *self.pool])))
        self.pool = []

    @staticmethod
    def _kill(handles: list) -> None:
        import ray

        for handle in handles:
            ray.kill(handle)
