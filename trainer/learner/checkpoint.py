"""Checkpoints of a learner: written atomically, loadable on any number of ranks.

A checkpoint folder holds `dcp/` (the sharded training state, policy and critic with their
optimizers, through torch.distributed.checkpoint), `policy/` (the policy as a Hugging Face
folder, safetensors, that transformers and vLLM load directly, with its own manifest) and
`state.json` (the counters, SAPO's value-token ids, and the caller's `extra`).

Writing and publishing are two acts. `write` (every rank) fills a hidden staging folder
beside the checkpoint, `.step_NNNNNN.partial`, with the shards; `publish` (only the driver
that owns the run, after every rank reported its shards written) records `manifest.json`
(size and sha256 of every file, `trainer.inference.manifest`) and renames the folder into
place. So a complete, verifiable folder appears or nothing does, and an orphaned rank whose
driver died can never make a checkpoint visible. `save` does both, for one process.

In memory (`export_state` / `import_state`): the same training state, unsharded on rank 0,
through the same `torch.distributed.checkpoint.state_dict` helpers but with no files, so a
learner can move to a different number of ranks between two steps (BiDiRL's hot switch,
`trainer.orchestrator.learner_group.LearnerGroup.resize`).

What is saved of a learner is what its public state methods hand over (`Trainable`: the
models with their optimizers, `progress()` and `restore_progress()`); this module is given
a learner and never imports one, so it stands below the learner.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn

from trainer import distributed
from trainer.inference.manifest import write_manifest

if TYPE_CHECKING:
    from trainer.config import AlgorithmConfig


class Trainable(Protocol):
    """What a checkpoint reads and restores of a learner (`trainer.learner.Learner`)."""

    algorithm: AlgorithmConfig
    policy: nn.Module
    value_token_ids: tuple[int, int] | None
    """SAPO's value rows: a checkpoint only loads into a learner that reads the same ones."""

    def models_and_optimizers(self) -> dict[str, tuple[nn.Module, torch.optim.Optimizer]]:
        """Each trained model with its optimizer, by name (`policy`, and `critic` when there is one)."""
        ...

    def progress(self) -> dict:
        """The counters (`version`, `skipped_steps`, `skipped_no_signal`, `bad_in_a_row`) and SE-RL's family
        weights (`family_weights`, None without them)."""
        ...

    def restore_progress(self, progress: dict) -> None:
        """Take back what `progress` gave (the keys present)."""
        ...

    def in_phase(self) -> bool:
        """Whether a warm start or critic pre-training is begun and not ended."""
        ...

    def full_policy_state(self) -> dict[str, torch.Tensor]: ...


class CheckpointError(RuntimeError):
    """A checkpoint is missing or unreadable; the message names the folder."""


def full_state(model: nn.Module, sharded: bool) -> dict[str, torch.Tensor]:
    """A model's full (unsharded) weights on CPU; gathered on every rank when `sharded`."""
    if not sharded:  # the plain module holds the full tensors: a copy is all it takes
        return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(model, options=options)
    return {k: v.detach().clone() if v.device.type == "cpu" else v.detach().cpu() for k, v in state.items()}


def _training_state(learner: Trainable) -> dict:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    state = {}
    for name, (model, optimizer) in learner.models_and_optimizers().items():
        state[name], state[f"{name}_optim"] = get_state_dict(model, optimizer)
    return state


def staging_folder(directory: str | Path) -> Path:
    """Where the ranks write the checkpoint `directory` before the driver publishes it."""
    directory = Path(directory)
    return directory.parent / f".{directory.name}.partial"


def prepare(directory: str | Path) -> Path:
    """An empty staging folder for `directory` (the driver calls this before the ranks write)."""
    staging = staging_folder(directory)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def publish(directory: str | Path) -> Path:
    """The owner's act: record the manifest of `directory`'s staged shards, last, and rename
    the staging folder into place, replacing an older `directory`."""
    directory = Path(directory)
    staging = staging_folder(directory)
    if not (staging / "state.json").is_file():
        raise CheckpointError(f"checkpoint {directory}: the ranks wrote no state.json to {staging}")
    write_manifest(staging)
    _publish(staging, directory)
    return directory


def _publish(staging: Path, directory: Path) -> None:
    """Move a complete `staging` folder to `directory`, replacing an older one."""
    if directory.exists():
        trash = directory.parent / f".{directory.name}.old"
        shutil.rmtree(trash, ignore_errors=True)
        os.replace(directory, trash)
        os.replace(staging, directory)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(staging, directory)


def save(learner: Trainable, directory: str | Path, extra: dict | None = None, tokenizer=None) -> Path:
    """Write `learner`'s checkpoint to `directory` and publish it, in one process (a learner
    without a driver: tests, one-off scripts). Every rank calls this."""
    if distributed.rank() == 0:
        prepare(directory)
    distributed.barrier()
    write(learner, directory, extra, tokenizer)
    if distributed.rank() == 0:
        publish(directory)
    distributed.barrier()
    return Path(directory)


def write(learner: Trainable, directory: str | Path, extra: dict | None = None, tokenizer=None) -> Path:
    """Write `learner`'s shards into `directory`'s staging folder (made by `prepare`), every
    rank its own; rank 0 adds the Hugging Face export (with its manifest) and `state.json`.
    Publishes nothing: that is `publish`, the driver's. Returns the staging folder."""
    import torch.distributed.checkpoint as dcp

    staging = staging_folder(directory)
    with warnings.catch_warnings():  # single-process saves are intended, not a mistake
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.save(_training_state(learner), checkpoint_id=str(staging / "dcp"), process_group=distributed.group())
    full = learner.full_policy_state()
    if distributed.rank() == 0:
        # A plain copy writes the export: a sharded module's own save_pretrained would
        # reach for its sharded parameters.
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        plain = AutoModelForCausalLM.from_config(learner.policy.config)
        plain.load_state_dict(full)
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # its "Writing model shards" bar would draw over the training bar
        try:
            plain.save_pretrained(staging / "policy", safe_serialization=True)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        if tokenizer is not None:
            tokenizer.save_pretrained(staging / "policy")
        progress = learner.progress()
        state = {key: progress[key] for key in ("version", "skipped_steps", "skipped_no_signal")}
        if progress["family_weights"] is not None:
            state["family_weights"] = progress["family_weights"]
        if learner.value_token_ids is not None:  # a resumed run must read values from the same rows
            state["value_token_ids"] = list(learner.value_token_ids)
        state.update(extra or {})
        write_manifest(staging / "policy")  # the export verifies itself when loaded alone
        (staging / "state.json").write_text(json.dumps(state, indent=2))
    distributed.barrier()
    return staging


def export_state(learner: Trainable) -> dict | None:
    """The learner's whole training state, unsharded, on CPU: each model's full weights and
    its optimizer's full state (keyed by parameter names, so any sharding can take them), the
    counters, SE-RL's family weights and the RNG. Every rank must call it (the shards are
    gathered); rank 0 gets the state, the others None. On one plain rank the tensors may be
    the live ones: copy before changing the learner (a Ray call copies)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    if learner.in_phase():
        raise RuntimeError(
            "the learner is mid warm start or critic pre-training: move it between steps, after their end_"
        )
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    models = {
        name: get_state_dict(model, optimizer, options=options)
        for name, (model, optimizer) in learner.models_and_optimizers().items()
    }
    if distributed.rank() != 0:
        return None
    return {
        "models": models,
        **learner.progress(),
        "value_token_ids": learner.value_token_ids,
        "rng": torch.get_rng_state(),
    }


def import_state(learner: Trainable, state: dict) -> None:
    """Load `export_state`'s state into `learner` (built from the same config, on any number
    of ranks: every rank calls it with the whole state and keeps its own shards)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    if state["value_token_ids"] != learner.value_token_ids:
        raise ValueError(
            f"the state reads values from tokens {state['value_token_ids']}, this learner from "
            f"{learner.value_token_ids}: build it with the same algorithm and model"
        )
    models = learner.models_and_optimizers()
    if set(models) != set(state["models"]):
        raise ValueError(f"the state holds models {sorted(state['models'])}, this learner {sorted(models)}")
    options = StateDictOptions(full_state_dict=True)
    for name, (model, optimizer) in models.items():
        weights, optimizer_state = state["models"][name]
        set_state_dict(model, optimizer, model_state_dict=weights, optim_state_dict=optimizer_state, options=options)
    learner.restore_progress(state)
    torch.set_rng_state(state["rng"])


def load(learner: Trainable, directory: str | Path) -> dict:
    """Restore `learner`'s weights, optimizers and counters from `save`; returns `state.json`."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    # DCP reports read failures as CheckpointException, a BaseException.
    failures = (Exception, dcp.CheckpointException)
    directory = Path(directory)
    try:
        state = json.loads((directory / "state.json").read_text())
    except failures as exc:
        raise CheckpointError(f"checkpoint {directory} is unreadable: {type(exc).__name__}: {exc}") from exc
    saved_ids = tuple(state["value_token_ids"]) if state.get("value_token_ids") else None
    if saved_ids != learner.value_token_ids:
        raise CheckpointError(
            f"checkpoint {directory} reads values from tokens {saved_ids} (None: no SAPO value tokens), "
            f"this learner ({learner.algorithm.name}) from {learner.value_token_ids}: "
            "resume with the same algorithm and model"
        )
    try:
        training = _training_state(learner)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.load(training, checkpoint_id=str(directory / "dcp"), process_group=distributed.group())
        for name, (model, optimizer) in learner.models_and_optimizers().items():
            set_state_dict(
                model, optimizer, model_state_dict=training[name], optim_state_dict=training[f"{name}_optim"]
            )
    except failures as exc:  # a torn or foreign checkpoint: say which one
        raise CheckpointError(f"checkpoint {directory} is unreadable: {type(exc).__name__}: {exc}") from exc
    learner.restore_progress(
        {
            "version": state["version"],
            "skipped_steps": state.get("skipped_steps", 0),
            "skipped_no_signal": state.get("skipped_no_signal", 0),
            "family_weights": state.get("family_weights"),
        }
    )
    return state
