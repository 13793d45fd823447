"""From the config a user wrote to the config that runs: the rules between sections, once.

`check(config, where)` states what must hold between sections (no single field can);
`resolve(config)` settles every value derived from others, so each component reads its own
section as it is and decides nothing more. `load_config` reads a file and overrides into
the schema (`trainer.config`) and runs both. The recipe runs only a resolved config
(`TrainConfig.resolved`: `resolve`'s output, unchanged since), so a config built or changed
in code goes through `resolve` first (resolving twice changes nothing); the run's
`config.yaml` is the resolved config: what ran, not what was asked.

What is derived (`DERIVED` holds the same list for `python -m trainer.train --help`):

- `algorithm.loss_aggregation`, `algorithm.clip_low`, `algorithm.clip_high`: unset, the
  algorithm's paper defaults (`trainer.algorithms.registry.LOSS_DEFAULTS`); the clip range
  stays unset for SAO's masked loss, which has none.
- `algorithm.gae_lambda`: unset under SAPO, 0.95 (its paper's); otherwise unset means SAO's
  length-adaptive lambda and stays so.
- `orchestrator.max_staleness`: 0 under `mode: sync` and `multiplex: colocated` (both train
  on a batch generated whole by the current weights); colocated also waits
  (`staleness_policy: wait`).
- `rollout.prefix_cache`: off under `mode: sync` and `orchestrator.deterministic` (reused
  KV blocks would make results depend on which episodes shared a cache).
- `rollout.batch_turns`: on only with the prefix cache and the hf engine (the engine that
  decodes rows of several episodes together).
- `learner.tree_packing`: when not set, on exactly when `rollout.kind` is `tree` (PATR's
  trees share prefixes).
"""

from __future__ import annotations

from pathlib import Path

from sandboxes.yaml_files import ConfigError
from sandboxes.yaml_files import load_config as load_sections
from trainer.algorithms.registry import ALGORITHMS, LOSS_DEFAULTS, get_algorithm
from trainer.config import AlgorithmConfig, TrainConfig

DERIVED: dict[str, str] = {
    "algorithm.loss_aggregation": "null: the algorithm's own ("
    + ", ".join(f"{name} {LOSS_DEFAULTS[spec.policy_loss]['aggregation']}" for name, spec in ALGORITHMS.items())
    + ")",
    "algorithm.clip_low": "null: the algorithm's own (0.2; SAO has no clip)",
    "algorithm.clip_high": "null: the algorithm's own (0.2, DAPO 0.28; SAO has no clip)",
    "algorithm.gae_lambda": "null: 0.95 under sapo, else SAO's length-adaptive lambda",
    "orchestrator.max_staleness": "0 under orchestrator.mode=sync or orchestrator.multiplex=colocated",
    "orchestrator.staleness_policy": "wait under orchestrator.multiplex=colocated",
    "rollout.prefix_cache": "off under orchestrator.mode=sync or orchestrator.deterministic=true",
    "rollout.batch_turns": "on only with rollout.prefix_cache and model.engine=hf",
    "learner.tree_packing": "unset: on exactly when rollout.kind=tree",
}
"""Each derived field and what it is derived from, as `--help` prints it."""


def check(config: TrainConfig, where: str) -> TrainConfig:
    """Rules between sections, which no single field can state; `where` names the file or
    the overrides in the error."""
    spec = get_algorithm(config.algorithm.name)
    if spec.advantages != "gae" and spec.critic != "shared" and config.algorithm.group_size < 2:
        raise ConfigError(
            f"{where}: field 'algorithm.group_size': {config.algorithm.name} compares rollouts of a task, needs >= 2"
        )
    if config.rollout.kind == "tree" and config.rollout.tree.scorer == "value" and spec.critic != "separate":
        raise ConfigError(
            f"{where}: field 'rollout.tree.scorer': 'value' scores branches with the critic; "
            f"{config.algorithm.name} has none (use rollout.tree.scorer=heuristic or judge)"
        )
    if config.algorithm.allocation == "vigor":
        _check_vigor(config, spec, where)
    if config.orchestrator.multiplex != "static":
        _check_multiplex(config, where)
    if config.orchestrator.mode == "sync" and config.orchestrator.deterministic:
        raise ConfigError(
            f"{where}: field 'orchestrator.deterministic': applies to mode=async (sync is deterministic already)"
        )
    return config


def _check_multiplex(config: TrainConfig, where: str) -> None:
    orchestration = config.orchestrator
    field = f"{where}: field 'orchestrator.multiplex': {orchestration.multiplex}"
    if orchestration.mode != "async" or orchestration.deterministic:
        raise ConfigError(f"{field} moves units while episodes stream; needs orchestrator.mode=async, not "
                          "sync nor deterministic (their batches are fixed in advance)")  # fmt: skip
    if config.placement.learner_gpus != config.placement.worker_gpus:
        raise ConfigError(f"{field} lends units between the pools; placement.learner_gpus and "
                          "placement.worker_gpus must be equal (a unit is the same device in either role)")  # fmt: skip


def _check_vigor(config: TrainConfig, spec, where: str) -> None:
    algorithm = config.algorithm
    if spec.objective != "group":
        raise ConfigError(
            f"{where}: field 'algorithm.allocation': vigor spreads a group method's rollouts over its prompts; "
            f"{algorithm.name} is not one (use grpo, dr_grpo, dapo or grpo_mask)"
        )
    if algorithm.group_size < algorithm.vigor.m0:
        raise ConfigError(
            f"{where}: field 'algorithm.vigor.m0': vigor's first round gives every prompt m0={algorithm.vigor.m0} "
            f"rollouts, more than the budget of algorithm.group_size={algorithm.group_size} per prompt"
        )
    if config.rollout.kind == "tree":
        raise ConfigError(
            f"{where}: field 'algorithm.allocation': vigor needs rollout.kind=linear (a tree's number of "
            "branches is known only once it is played, so a budget of trajectories could not be spent exactly)"
        )


def resolve_algorithm(algorithm: AlgorithmConfig) -> AlgorithmConfig:
    """`algorithm` with its loss aggregation, clip range and GAE lambda settled (see the
    module docstring). The learner takes only a resolved one."""
    spec = get_algorithm(algorithm.name)
    defaults = LOSS_DEFAULTS[spec.policy_loss]
    update = {}
    if algorithm.loss_aggregation is None:
        update["loss_aggregation"] = defaults["aggregation"]
    for field in ("clip_low", "clip_high"):
        if field in defaults and getattr(algorithm, field) is None:
            update[field] = defaults[field]
    if algorithm.gae_lambda is None and spec.gae_lambda is not None:
        update["gae_lambda"] = spec.gae_lambda
    return algorithm.model_copy(update=update) if update else algorithm


def resolve(config: TrainConfig) -> TrainConfig:
    """The effective config: every derived value settled (see the module docstring)."""
    orchestration, rollout, learner = config.orchestrator, config.rollout, config.learner
    staleness = {}
    if orchestration.mode == "sync" or orchestration.multiplex == "colocated":
        staleness["max_staleness"] = 0
    if orchestration.multiplex == "colocated":
        staleness["staleness_policy"] = "wait"
    prefix_cache = rollout.prefix_cache and not (orchestration.mode == "sync" or orchestration.deterministic)
    batch_turns = rollout.batch_turns and prefix_cache and config.model.engine == "hf"
    tree_packing = learner.tree_packing if "tree_packing" in learner.model_fields_set else rollout.kind == "tree"
    return config.model_copy(
        update={
            "algorithm": resolve_algorithm(config.algorithm),
            "orchestrator": orchestration.model_copy(update=staleness),
            "rollout": rollout.model_copy(update={"prefix_cache": prefix_cache, "batch_turns": batch_turns}),
            "learner": learner.model_copy(update={"tree_packing": tree_packing}),
        }
    ).mark_resolved()


def load_config(path: str | Path | None, overrides: list[str] = ()) -> TrainConfig:
    """Load `path` (YAML, sections as in `TrainConfig`) and apply `section.field=value`
    overrides (values parsed as YAML), the same way evaluations read theirs
    (`sandboxes.yaml_files.load_config`); then `check` the rules between sections and
    `resolve` every derived value: the config returned is the one that runs."""
    return load_sections(
        TrainConfig, path, overrides, command="python -m trainer.train", check=lambda c, w: resolve(check(c, w))
    )
