"""The learner group: `ranks` Ray actors that together are one FSDP2 learner.

Each actor is one rank of a torch.distributed process group (gloo on CPU, NCCL on GPU) and
holds its shard of the policy and critic (`trainer.learner.Learner`). Every call goes to all
ranks with the same arguments (each rank takes every world-size-th trajectory of a batch,
and every collective needs all ranks); rank 0's answer is returned. One rank on CPU makes no
process group and shards nothing; one rank with a GPU makes a one-rank NCCL group, so the
learner lives on its GPU (FSDP2's bf16 mixed precision included) as it does with several.

Resizing (BiDiRL's hot switch, arXiv 2607.09207): between two steps `resize(ranks)` moves
the learner's whole training state to a new group of `ranks` ranks, so units lent by the
rollout pool can join it and leave it again. The state is gathered unsharded on rank 0, in
memory (`trainer.learner.checkpoint.export_state`: the checkpoint's state-dict helpers
without the files), the old ranks' actors end, new ones start, rendezvous, and each keeps
its shards of that state (`import_state`). Where BiDiRL keeps each rank's process and
offloads its FSDP state to host memory, this gives the new group fresh actors: a gloo or
NCCL group cannot change its size, and tearing one down inside a live process is not
reliably safe (`trainer.distributed.exit_rank`). Started cold, a switch then waits for
processes to start and import torch (seconds); with `spares`, processes started and warmed
ahead take the ranks, and a switch costs the gather, the learner's build, the rendezvous
and the load.
"""

from __future__ import annotations

import logging
import os
import time

from trainer.config import TrainConfig
from trainer.inference.trajectory import Trajectory

logger = logging.getLogger(__name__)


class LearnerRank:
    def __init__(self, config: dict, rank: int, world_size: int, threads: int) -> None:
        """Nothing heavy yet: rank 0 first names the rendezvous address on its own node
        (`rendezvous`), then every rank joins it (`setup`)."""
        self.config_payload, self.rank, self.world_size, self.threads = config, rank, world_size, threads

    def warm(self) -> None:
        """Import what `setup` needs (torch, FSDP2, the state-dict helpers, the learner, the
        model's and tokenizer's transformers modules: seconds on a loaded CPU), so that a
        spare started ahead of a `LearnerGroup.resize` joins without paying for it. The
        model is built on the meta device: no memory, no weights read."""
        import torch
        import torch.distributed.checkpoint.state_dict  # noqa: F401
        import torch.distributed.fsdp  # noqa: F401
        from transformers import AutoConfig, AutoModelForCausalLM

        import trainer.build  # noqa: F401
        import trainer.learner  # noqa: F401
        from trainer.inference.models import load_tokenizer, resolve_model_path

        name = self.config_payload["model"]["name"]
        load_tokenizer(name)
        with torch.device("meta"):
            AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(resolve_model_path(name)))

    def assign(self, rank: int, world_size: int, threads: int) -> None:
        """Take rank `rank` of `world_size` (a spare taken into a group, before `setup`)."""
        self.rank, self.world_size, self.threads = rank, world_size, threads

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
        self.probes: list[Trajectory] = []
        self.learner, self.tokenizer = build_learner(self.config, mesh=mesh)

    def version(self) -> int:
        return self.learner.version

    def set_probes(self, demonstrations: list[Trajectory]) -> None:
        """Gold trajectories whose probability `step` reports after each update."""
        self.probes = demonstrations

    def step(self, trajectories: list[Trajectory]):
        """One learner step; its `StepResult` with the step's seconds (and, when probes are
        set, the gold actions' probability) added to the metrics."""
        started = time.monotonic()
        result = self.learner.step(trajectories)
        if self.probes:
            result.metrics["gold_probability"] = round(self.learner.gold_probability(self.probes), 5)
        result.metrics["learner_seconds"] = round(time.monotonic() - started, 4)
        return result

    def weights(self, with_critic: bool) -> dict:
        """The full (gathered) weights the engines load: the policy, and the critic for
        value-scored tree rollouts."""
        weights = {"policy": self.learner.engine_weights()}
        if with_critic and self.learner.critic is not None:
            weights["critic"] = self.learner.full_state(self.learner.critic)
        return weights

    def begin_warm_start(self, demonstrations: list[Trajectory], lr: float) -> None:
        self.learner.begin_warm_start(demonstrations, lr)

    def warm_start_steps(self, steps: int) -> list[float]:
        return self.learner.warm_start_steps(steps)

    def end_warm_start(self) -> None:
        self.learner.end_warm_start()

    def begin_critic_pretraining(self, trajectories: list[Trajectory]) -> None:
        self.learner.begin_critic_pretraining(trajectories)

    def critic_pretraining_steps(self, steps: int) -> list[float]:
        return self.learner.critic_pretraining_steps(steps)

    def end_critic_pretraining(self) -> None:
        self.learner.end_critic_pretraining()

    def has_critic(self) -> bool:
        return self.learner.critic is not None

    def write_checkpoint(self, directory: str, extra: dict) -> str:
        """This rank's shards of the checkpoint `directory`, into its staging folder; the
        driver publishes it (`trainer.learner.checkpoint`)."""
        from trainer.learner import checkpoint

        return str(checkpoint.write(self.learner, directory, extra, self.tokenizer))

    def load(self, directory: str) -> dict:
        return self.learner.load(directory)

    def export_state(self) -> dict | None:
        """The whole training state, unsharded (rank 0; None on the others), for `resize`."""
        from trainer.learner import checkpoint

        state = checkpoint.export_state(self.learner)
        if state is not None:
            state["probes"] = self.probes
        return state

    def import_state(self, state: dict) -> int:
        """Take this rank's shards of `export_state`'s state; returns the version."""
        from trainer.learner import checkpoint

        checkpoint.import_state(self.learner, state)
        self.probes = state["probes"]
        return self.learner.version


class LearnerGroup:
    """Handles on the ranks' actors. Every method runs on all ranks with the same arguments
    (each collective needs every rank) and returns rank 0's answer; the `_ref` methods return
    rank 0's Ray object reference instead of waiting, for the orchestrator's event loop."""

    def __init__(self, config: TrainConfig, *, ranks: int = 1, num_gpus: float = 0, spares: int = 0) -> None:
        """`spares`: rank processes kept started and warm (`LearnerRank.warm`) for `resize`
        to take, so a switch does not wait for a process to start and import torch; each
        holds its `num_gpus` while it waits (on a GPU machine, a GPU: leave 0 there unless
        the units are shared)."""
        self.payload = config.model_dump()
        self.num_gpus = num_gpus
        self.spares = spares
        self._spares: dict = {}
        """Spare actor handle -> the reference of its `warm` call."""
        self.ranks = self._start(ranks)
        self._refill()

    def _spawn(self):
        import ray

        actor = ray.remote(num_cpus=0, num_gpus=self.num_gpus)(LearnerRank)
        return actor.remote(self.payload, 0, 1, 1)

    def _refill(self) -> None:
        """Start spares (without waiting for them) until `spares` are there."""
        while len(self._spares) < self.spares:
            handle = self._spawn()
            self._spares[handle] = handle.warm.remote()

    def wait_spares(self) -> None:
        """Wait until every spare has started and warmed up (e.g. before timing a switch)."""
        import ray

        ray.get(list(self._spares.values()))

    def _start(self, ranks: int) -> list:
        """`ranks` rank actors (spares first, then new ones), their setup queued (each rank
        runs its calls in order)."""
        import ray

        if ranks < 1:
            raise ValueError(f"a learner group needs at least one rank, not {ranks}")
        threads = max(1, (os.cpu_count() or 1) // ranks)
        handles = []
        for rank in range(ranks):
            handle = next(iter(self._spares), None)
            if handle is not None:
                del self._spares[handle]
            else:
                handle = self._spawn()
            handle.assign.remote(rank, ranks, threads)
            handles.append(handle)
        # Rank 0's node, wherever Ray put it (another node of a cluster: not 127.0.0.1).
        address = ray.get(handles[0].rendezvous.remote())
        for rank in handles:
            rank.setup.remote(address)
        return handles

    def _refs(self, method: str, *args) -> list:
        return [getattr(rank, method).remote(*args) for rank in self.ranks]

    def _get(self, method: str, *args):
        import ray

        return ray.get(self._refs(method, *args))[0]

    # -- asynchronous: the orchestrator waits on these with everything else ------------------
    def step_ref(self, trajectories: list[Trajectory]):
        """Start a learner step; a reference to its `StepResult`."""
        return self._refs("step", trajectories)[0]

    def weights_ref(self, with_critic: bool):
        """A reference to the full weights the engines load (the critic's too when asked)."""
        return self._refs("weights", with_critic)[0]

    # -- synchronous --------------------------------------------------------------------------
    def version(self) -> int:
        return self._get("version")

    def has_critic(self) -> bool:
        return self._get("has_critic")

    def set_probes(self, demonstrations: list[Trajectory]) -> None:
        self._get("set_probes", demonstrations)

    # A warm start (and critic pre-training) in chunks, for a progress bar between them: the
    # batch and optimizer stay on the ranks from `begin_` to `end_`, so any chunking makes the
    # same updates as `Learner.warm_start` (`Learner.pretrain_critic`) in one call.
    def begin_warm_start(self, demonstrations: list[Trajectory], lr: float) -> None:
        self._get("begin_warm_start", demonstrations, lr)

    def warm_start_steps(self, steps: int) -> list[float]:
        """`steps` more supervised steps; each one's loss."""
        return self._get("warm_start_steps", steps)

    def end_warm_start(self) -> None:
        """A new version; the critic restarted from the fine-tuned policy."""
        self._get("end_warm_start")

    def begin_critic_pretraining(self, trajectories: list[Trajectory]) -> None:
        self._get("begin_critic_pretraining", trajectories)

    def critic_pretraining_steps(self, steps: int) -> list[float]:
        """`steps` more critic updates; each one's value loss."""
        return self._get("critic_pretraining_steps", steps)

    def end_critic_pretraining(self) -> None:
        self._get("end_critic_pretraining")

    def save(self, directory: str, extra: dict) -> str:
        """A checkpoint at `directory`: the ranks write their shards into a hidden staging
        folder; once all of them reported, this process (the driver that owns the run) writes
        the manifest and renames the folder into place. A rank left running after its driver
        died never publishes anything."""
        from trainer.learner import checkpoint

        checkpoint.prepare(directory)
        self._get("write_checkpoint", directory, extra)  # every rank's shards are written
        return str(checkpoint.publish(directory))

    def load(self, directory: str) -> dict:
        return self._get("load", directory)

    def resize(self, ranks: int) -> float:
        """Move the learner to `ranks` ranks (BiDiRL: units lent by, or returned to, the
        rollout pool); returns the seconds it took (0.0 when it already has that many).
        Weights, optimizer states, version and counters, SE-RL's family weights, the RNG and
        the probes carry over, so the next step is the step the old group would have taken
        (up to float rounding of the sharded reductions). Call it between steps: a step or
        weights request already sent finishes first (each rank runs its calls in order) and
        its result stays readable; not inside a warm start or critic pre-training."""
        import ray

        if ranks < 1:
            raise ValueError(f"a learner group needs at least one rank, not {ranks}")
        if ranks == len(self.ranks):
            return 0.0
        started = time.monotonic()
        before = len(self.ranks)
        refs = self._refs("export_state")  # every rank: the shards are gathered to rank 0
        ray.get(refs)
        state = refs[0]  # stays in the object store: the new ranks fetch it from there
        gathered = time.monotonic()
        self._kill(self.ranks)  # the units are free before the new ranks take them
        self.ranks = self._start(ranks)
        ray.get([rank.import_state.remote(state) for rank in self.ranks])
        seconds = time.monotonic() - started
        self._refill()  # the spares taken are replaced in the background
        logger.info(
            "learner resized from %d to %d ranks in %.2fs (gather %.2fs, start and load %.2fs)",
            before, ranks, seconds, gathered - started, seconds - (gathered - started),
        )  # fmt: skip
        return seconds

    def kill(self) -> None:
        """End the ranks and the spares."""
        self._kill([*self.ranks, *self._spares])
        self._spares.clear()

    @staticmethod
    def _kill(handles: list) -> None:
        import ray

        for handle in handles:
            ray.kill(handle)
