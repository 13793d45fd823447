"""`trainer.resolve`: every derived value settled once, explicit values kept, and the result
is what the components read (issue #34: no component decides a configured value again).
`learner.tree_packing` is checked through the learner that reads it, in
`tests/trainer/test_tree_training.py`."""

from __future__ import annotations

import pytest

from trainer.config import TrainConfig, leaf_fields
from trainer.resolve import DERIVED, load_config, resolve, resolve_algorithm


def resolved(*overrides: str) -> TrainConfig:
    return load_config(None, list(overrides))


@pytest.mark.parametrize(
    ("overrides", "aggregation", "clip"),
    [
        ([], "token_mean", (None, None)),  # SAO: its mask has no clip range
        (["algorithm.name=grpo", "algorithm.group_size=2"], "sequence_mean", (0.2, 0.2)),
        (["algorithm.name=dr_grpo", "algorithm.group_size=2"], "sequence_sum_norm", (0.2, 0.2)),
        (["algorithm.name=dapo", "algorithm.group_size=2"], "token_mean", (0.2, 0.28)),
        (["algorithm.name=grpo_mask", "algorithm.group_size=2"], "token_mean", (None, None)),
        (["algorithm.name=ppo"], "token_mean", (0.2, 0.2)),
        (["algorithm.name=decoupled_ppo"], "token_mean", (0.2, 0.2)),
        (["algorithm.name=sapo", "rollout.tree.scorer=heuristic"], "token_mean", (0.2, 0.2)),
        # Set by the user: kept.
        (
            [
                "algorithm.name=dapo",
                "algorithm.group_size=2",
                "algorithm.clip_high=0.3",
                "algorithm.loss_aggregation=sequence_mean",
            ],
            "sequence_mean",
            (0.2, 0.3),
        ),  # fmt: skip
    ],
)
def test_each_algorithm_gets_its_papers_aggregation_and_clip(overrides, aggregation, clip):
    algorithm = resolved(*overrides).algorithm
    assert (algorithm.loss_aggregation, (algorithm.clip_low, algorithm.clip_high)) == (aggregation, clip)


def test_gae_lambda_is_sapos_own_only_under_sapo():
    assert resolved("algorithm.name=sapo").algorithm.gae_lambda == 0.95
    assert resolved("algorithm.name=sapo", "algorithm.gae_lambda=0.9").algorithm.gae_lambda == 0.9
    assert resolved().algorithm.gae_lambda is None  # SAO: the length-adaptive lambda
    assert resolved("algorithm.name=ppo").algorithm.gae_lambda is None


@pytest.mark.parametrize(
    ("overrides", "staleness", "policy", "prefix_cache", "batch_turns"),
    [
        ([], 1, "wait", True, True),
        (["orchestrator.max_staleness=3", "orchestrator.staleness_policy=drop"], 3, "drop", True, True),
        (["orchestrator.mode=sync", "orchestrator.max_staleness=3"], 0, "wait", False, False),
        (["orchestrator.deterministic=true"], 1, "wait", False, False),
        (["orchestrator.multiplex=colocated", "orchestrator.staleness_policy=drop"], 0, "wait", True, True),
        (["orchestrator.multiplex=bidirectional"], 1, "wait", True, True),
        (["rollout.prefix_cache=false"], 1, "wait", False, False),
        (["model.engine=vllm"], 1, "wait", True, False),  # only the hf engine batches rows
        (["rollout.batch_turns=false"], 1, "wait", True, False),
    ],
)
def test_staleness_prefix_cache_and_turn_batching(overrides, staleness, policy, prefix_cache, batch_turns):
    config = resolved(*overrides)
    assert (config.orchestrator.max_staleness, config.orchestrator.staleness_policy) == (staleness, policy)
    assert (config.rollout.prefix_cache, config.rollout.batch_turns) == (prefix_cache, batch_turns)


def test_resolving_twice_changes_nothing_and_a_config_built_in_code_resolves_the_same():
    overrides = ["algorithm.name=dapo", "algorithm.group_size=2", "orchestrator.mode=sync", "rollout.kind=tree",
                 "rollout.tree.scorer=heuristic"]  # fmt: skip
    config = resolved(*overrides)
    assert resolve(config) == config
    built = TrainConfig(
        algorithm={"name": "dapo", "group_size": 2},
        orchestrator={"mode": "sync"},
        rollout={"kind": "tree", "tree": {"scorer": "heuristic"}},
    )
    assert built != config and resolve(built) == config


def test_every_derived_field_exists_and_help_names_what_it_follows(capsys):
    from trainer.train import main

    names = {name for name, _ in leaf_fields()}
    assert set(DERIVED) <= names
    main(["--help"])
    out = capsys.readouterr().out
    for name, rule in DERIVED.items():
        line = next(line for line in out.splitlines() if line.startswith(f"  {name}="))
        assert line.endswith(f"[derived: {rule}]")


def test_the_learner_refuses_an_unresolved_algorithm():
    from trainer.config import AlgorithmConfig, LearnerConfig
    from trainer.inference.models import load_policy
    from trainer.learner import Learner

    raw = AlgorithmConfig(name="grpo", group_size=2)
    with pytest.raises(ValueError, match="unresolved fields .* trainer.resolve.resolve_algorithm"):
        Learner(load_policy("tiny", seed=0), None, pad_id=0, algorithm=raw, optim=LearnerConfig())
    assert resolve_algorithm(raw).loss_aggregation == "sequence_mean"


def test_the_recipe_runs_only_a_resolved_config_unchanged_since():
    from trainer.config import ConfigError
    from trainer.recipes.rl import RLRecipe

    config = load_config(None, ["orchestrator.mode=sync"])
    assert config.resolved
    changed = config.model_copy(update={"orchestrator": config.orchestrator.model_copy(update={"mode": "async"})})
    for unresolved in (TrainConfig(), changed):  # built in code; changed after resolving
        assert not unresolved.resolved
        with pytest.raises(ConfigError, match="the recipe runs a resolved config: .* trainer.resolve.resolve"):
            RLRecipe(unresolved)
    assert resolve(changed).resolved
