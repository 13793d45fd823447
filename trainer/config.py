"""Typed configuration of `make train-swe`: a YAML file under `configs/` plus `key=value`
overrides from the command line. Errors name the file (or the override) and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ConfigError(ValueError):
    pass


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, protected_namespaces=())

    run_name: str = "train-swe"
    """Folder under `output_dir` for metrics and checkpoints."""
    output_dir: str = "runs"
    """Where runs are written."""
    model: str = "tiny"
    """Hugging Face model name or folder; `tiny` is the shipped randomly initialised model."""
    seed: int = 0
    """Seeds weights (for random init), sampling and task order."""
    engine: Literal["hf", "vllm"] = "hf"
    """Inference backend for rollouts: `hf` (transformers, CPU) or `vllm` (GPU)."""
    sandbox_backend: Literal["local", "docker"] = "local"
    """Where episodes run: `local` (bubblewrap) or `docker`."""
    tasks: str = "builtin"
    """`builtin`, a folder of task YAMLs, or a SWE-bench JSONL / dataset name."""
    task_ids: list[str] = Field(default_factory=list)
    """Only these task ids (all when empty)."""
    repo_cache: str | None = None
    """Folder of git clones (`owner__name` or `owner/name`) that SWE-bench rows' workspaces
    are made from; their environments are then built with pip for `sandbox_backend`
    (`tasks/README.md`). Rows that cannot be had this way are left out with the reason."""
    algorithm: Literal["sao", "ppo", "decoupled_ppo", "grpo", "dr_grpo", "dapo", "sapo"] = "sao"
    """Update rule (`trainer.algorithms.registry`): SAO (default), PPO with a critic, AReaL's
    decoupled PPO, the critic-free group methods GRPO, Dr.GRPO and DAPO, or SAPO (one model
    for policy and value, read through two reserved vocabulary tokens)."""
    group_size: int = Field(default=1, gt=0)
    """Rollouts per task per step. SAO: 1 (a single rollout per prompt); group methods need >= 2."""
    rollout: Literal["linear", "tree"] = "linear"
    """`linear` episodes, or PATR `tree` rollouts that fork promising branches (one tree per
    picked task and group member; its branches form one group)."""
    tree_branches: int = Field(default=4, gt=0)
    """Tree rollouts: most branches per tree (a hard limit)."""
    tree_children: int = Field(default=2, ge=2)
    """Tree rollouts: branches a promising branch splits into."""
    tree_expand_every: int = Field(default=2, gt=0)
    """Tree rollouts: turns between scoring rounds."""
    tree_scorer: Literal["value", "heuristic", "judge"] = "value"
    """Tree rollouts: who rates branches: the critic (`value`), rules over what the agent saw
    (`heuristic`), or the policy's own engine as an LLM judge (`judge`)."""
    curriculum: Literal["round_robin", "pac"] = "round_robin"
    """How tasks are picked each step: in turn, or PAC's Thompson sampling over task families
    (learnability and reward progress; its state is saved in checkpoints)."""
    steps: int = Field(default=4, ge=0)
    """Learner steps to run (0: only the warm start and critic pre-training, then a
    checkpoint `step_000000` to start other runs from)."""
    episodes_per_step: int = Field(default=3, gt=0)
    """Episodes (one per task, SAO's single rollout per prompt) per learner step."""
    max_turns: int = Field(default=3, gt=0)
    """Agent turns per episode (caps each task's own limit)."""
    max_new_tokens: int = Field(default=48, gt=0)
    """Tokens the policy may generate in one turn."""
    max_total_tokens: int = Field(default=2048, gt=0)
    """Tokens (prompt, actions and observations) per episode before it is truncated."""
    max_observation_chars: int = Field(default=2000, gt=0)
    """Tool output kept per observation (head and tail)."""
    temperature: float = Field(default=1.0, gt=0)
    """Sampling temperature; the learner scores tokens at the same temperature."""
    lr: float = Field(default=1e-6, gt=0)
    """Policy learning rate (AdamW)."""
    critic_lr: float = Field(default=5e-6, gt=0)
    """Critic learning rate (SAO: 5e-6)."""
    eps_low: float = Field(default=0.8, gt=0, le=1)
    """SAO mask: tokens with ratio <= 1 - eps_low are dropped (coding: 0.8)."""
    eps_high: float = Field(default=3.0, gt=0)
    """SAO mask: tokens with ratio >= 1 + eps_high are dropped (coding: 3.0)."""
    critic_steps: int = Field(default=2, ge=0)
    """Critic updates per policy update (SAO: 2)."""
    warm_start_steps: int = Field(default=0, ge=0)
    """Supervised steps on gold trajectories (each task's gold patch applied through the agent's
    own tools) before RL; a randomly initialised model solves nothing without them."""
    warm_start_lr: float = Field(default=3e-3, gt=0)
    """Learning rate of the warm start (its own AdamW)."""
    warm_start_style: Literal["auto", "edit", "patch"] = "patch"
    """How gold trajectories make their change: `edit` as `str_replace_editor` calls (a
    quarter of the tokens for a one-line fix), `patch` as `git apply` of the gold patch,
    `auto` as edits where the patch allows it."""
    eval_episodes: int = Field(default=0, ge=0)
    """Episodes played (the tasks in turn, fixed seeds) with the weights RL starts from and
    again with the final weights; their success rates go to `summary.json`. The same seeds
    both times (common random numbers), so the difference is the policy's, not the dice's."""
    critic_pretrain_steps: int = Field(default=0, ge=0)
    """Critic-only updates on the first batch before RL starts (SAO's value pre-training)."""
    freeze_critic_attention: bool = False
    """Freeze the critic's attention layers during RL (an option SAO reports)."""
    tau_v: float = Field(default=1.0, gt=0)
    """SAPO: temperature of the value readout `V = r_max * clip((z_w+ - z_w-) / tau_v, -1, 1)`;
    large enough that the logit gap stays inside the band (the clip has no gradient outside)."""
    r_max: float = Field(default=1.0, gt=0)
    """SAPO: largest |value| the readout can express; at least the largest |return|."""
    c_v: float = Field(default=0.5, ge=0)
    """SAPO: weight of the value loss (V before each turn toward its lambda-return)."""
    c_q: float = Field(default=0.5, ge=0)
    """SAPO: weight of the Q loss (Q after each turn toward `r + gamma V_next`)."""
    beta: float = Field(default=0.001, ge=0)
    """SAPO: weight of the k3 KL to the rollout policy (the engine's logprobs; no frozen copy)."""
    c_h: float = Field(default=0.0, ge=0)
    """SAPO: weight of the entropy bonus (0: off, no entropy is computed)."""
    clip_low: float | None = Field(default=None, gt=0)
    """PPO-family lower clip (default: the algorithm's own, 0.2)."""
    clip_high: float | None = Field(default=None, gt=0)
    """PPO-family upper clip (default: the algorithm's own; DAPO 0.28)."""
    gae_lambda: float | None = Field(default=None, ge=0, le=1)
    """Fixed policy GAE lambda (PPO: 0.95); None uses SAO's length-adaptive lambda."""
    lambda_alpha: float = Field(default=1.5, gt=0)
    """Length-adaptive GAE for the policy: lambda = 1 - 1/(alpha * length)."""
    gamma: float = Field(default=1.0, gt=0, le=1)
    """Discount per policy token."""
    loss_aggregation: Literal["token_mean", "sequence_mean", "sequence_sum_norm"] | None = None
    """How token losses are averaged over the batch (default: the algorithm's own)."""
    checkpoint_every: int = Field(default=0, ge=0)
    """Save a checkpoint every N steps (0: only at the end)."""
    resume: str | None = None
    """Checkpoint folder to resume from, or `auto`: the newest complete checkpoint of this
    run (a fresh start when there is none)."""
    mode: Literal["async", "sync"] = "async"
    """`async`: episodes stream to the learner as they finish and keep going across weight
    updates; `sync`: the baseline that generates a whole batch, then trains on it."""
    max_staleness: int = Field(default=1, ge=0)
    """Async: the most policy versions a consumed trajectory's oldest token may lag behind
    the learner; older ones are dropped and counted."""
    staleness_policy: Literal["wait", "drop"] = "wait"
    """Async: `wait` holds new episodes back while they could exceed `max_staleness`
    (counted as admission waits); `drop` never holds generation back and only drops."""
    deterministic: bool = False
    """Async, bitwise reproducible: batch b is fixed, generated with the weights of step
    b - max_staleness and consumed whole (overlap without timing-dependent results)."""
    rollout_workers: int = Field(default=2, gt=0)
    """Ray actors that play episodes, each with its own inference engine."""
    episodes_per_worker: int = Field(default=2, gt=0)
    """Episodes one worker plays at once (they share its engine, one turn at a time)."""
    batch_tokens: int = Field(default=0, ge=0)
    """Async: also step when the finished trajectories hold this many tokens (0: off)."""
    episode_timeout_s: float = Field(default=900.0, gt=0)
    """An episode running longer is taken as a hung worker: the worker is restarted and
    the episode retried."""
    max_attempts: int = Field(default=3, gt=0)
    """Tries per episode before an infrastructure failure drops it (counted)."""
    learner_ranks: int = Field(default=1, gt=0)
    """Ray actors forming the FSDP2 learner (gloo on CPU, NCCL with one GPU each)."""
    learner_gpus: float = Field(default=0.0, ge=0)
    """GPUs per learner rank (0 on CPU machines)."""
    worker_gpus: float = Field(default=0.0, ge=0)
    """GPUs per rollout worker (vllm engines; a fraction shares one GPU)."""
    ray_address: str | None = None
    """Ray cluster to join (`auto`, or host:port); None starts a local one."""


def _coerce(text: str):
    return yaml.safe_load(text) if text != "" else ""


CRITIC_FREE = ("grpo", "dr_grpo", "dapo", "sapo")


def _check_groups(config: TrainConfig, where: str) -> TrainConfig:
    if config.algorithm in ("grpo", "dr_grpo", "dapo") and config.group_size < 2:
        raise ConfigError(f"{where}: field 'group_size': {config.algorithm} compares rollouts of a task, needs >= 2")
    if config.rollout == "tree" and config.tree_scorer == "value" and config.algorithm in CRITIC_FREE:
        raise ConfigError(
            f"{where}: field 'tree_scorer': 'value' scores branches with the critic; {config.algorithm} has none "
            "(use tree_scorer=heuristic or judge)"
        )
    if config.mode == "sync" and config.deterministic:
        raise ConfigError(f"{where}: field 'deterministic': applies to mode=async (sync is deterministic already)")
    return config


def load_config(path: str | Path | None, overrides: list[str] = ()) -> TrainConfig:
    """Load `path` (YAML) and apply `key=value` overrides (values parsed as YAML)."""
    raw: dict = {}
    where = "defaults"
    if path is not None:
        where = str(path)
        try:
            raw = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected a mapping of fields")
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r}: expected key=value")
        if key not in TrainConfig.model_fields:
            raise ConfigError(f"override {item!r}: unknown field {key!r}")
        raw[key] = _coerce(value)
    try:
        return _check_groups(TrainConfig.model_validate(raw), where)
    except ValidationError as exc:
        problems = "; ".join(f"field '{'.'.join(map(str, e['loc']))}': {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{where}: {problems}") from None
