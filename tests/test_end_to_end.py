"""The user flows end to end: a few training steps, then an evaluation of the checkpoint."""

import json
import logging

import pytest
import torch
import yaml

from evals.config import EvalConfig
from evals.swe import evaluate
from tests.conftest import needs_bwrap
from trainer.resolve import load_config
from trainer.train import train


@needs_bwrap
def test_train_then_evaluate_the_checkpoint(tmp_path, ray_cluster):
    """Train two steps, evaluate the checkpoint, resume to a third step. Over 60 s on 2 cores:
    three real runs (Ray actors, sandboxed episodes, a critic pre-train and an evaluation), the
    one test that goes from training through evaluation to a resume."""
    config = load_config(
        None,
        [
            f"run.output_dir={tmp_path}",
            "run.name=e2e",
            "run.steps=2",
            "orchestrator.episodes_per_step=2",
            "rollout.max_turns=2",
            "rollout.max_new_tokens=16",
            "learner.lr=1e-4",
            "learner.critic_lr=1e-4",
            "warm_start.critic_pretrain_steps=2",
        ],
    )
    run_dir = train(config)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert record["episodes"] == 2 and record["infra_errors"] == 0
        # A randomly initialised policy with no warm start resolves nothing: any reward here
        # would be the grader paying for no fix.
        assert (record["success_rate"], record["reward_mean"]) == (0.0, 0.0) and record["policy_tokens"] > 0
        # Zero rewards and a value head that starts at exactly 0 (`ValueModel`): every return,
        # value and advantage is 0, so both losses are exactly 0, even after pre-training, and
        # no step has a signal: none is applied (issue #39), so nothing moves.
        assert (record["policy_loss"], record["value_loss"], record["grad_norm"]) == (0.0, 0.0, 0.0)
    assert (run_dir / "metrics.png").stat().st_size > 0
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    checkpoint = run_dir / "checkpoints" / "step_000002"
    state = json.loads((checkpoint / "state.json").read_text())
    assert (state["version"], state["skipped_no_signal"], state["skipped_steps"], state["step"]) == (0, 2, 0, 2)
    assert len(sum(state["schedule"]["consumed"], [])) == 4

    from tasks import builtin_tasks

    first = builtin_tasks()[0].id
    summary = evaluate(
        EvalConfig(
            model=str(checkpoint / "policy"),
            dataset="builtin",
            output=tmp_path / "eval",
            instances=[first],
            max_turns=2,
            max_new_tokens=16,
        )
    )
    assert summary["instances"] == 1 and summary["error"] == 0
    prediction = json.loads((tmp_path / "eval" / "predictions.jsonl").read_text())
    assert prediction["instance_id"] == first and prediction["model_name_or_path"].endswith("policy")

    # Resuming from the checkpoint continues the step count.
    resumed = load_config(
        None,
        [
            f"run.output_dir={tmp_path}",
            "run.name=e2e",
            "run.steps=3",
            "orchestrator.episodes_per_step=1",
            "rollout.max_turns=1",
            "rollout.max_new_tokens=8",
            f"run.resume={checkpoint}",
        ],
    )
    train(resumed)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    assert records[-1]["version"] + records[-1]["skipped_no_signal"] == 3  # the counts carried over


@needs_bwrap
def test_group_algorithm_with_value_free_learner_runs(tmp_path, ray_cluster):
    config = load_config(
        None,
        [f"run.output_dir={tmp_path}", "run.name=grpo", "algorithm.name=grpo", "algorithm.group_size=2", "run.steps=1",
         "orchestrator.episodes_per_step=1", "rollout.max_turns=1", "rollout.max_new_tokens=8"],
    )  # fmt: skip
    run_dir = train(config)
    record = json.loads((run_dir / "metrics.jsonl").read_text())
    assert record["episodes"] == 2 and record["skipped_steps"] == 0
    # A group of equal rewards teaches nothing: the step is skipped, not applied (issue #39).
    assert record["version"] == 1 - record["skipped_no_signal"]
    assert record["value_loss"] == 0.0  # no critic: nothing regressed
    # The run records the config that ran: GRPO's own aggregation and clip, resolved.
    ran = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert ran["algorithm"]["loss_aggregation"] == "sequence_mean" and ran["algorithm"]["clip_high"] == 0.2
    assert load_config(run_dir / "config.yaml") == config  # resolved already: loading it again changes nothing


@needs_bwrap
def test_vigor_allocation_trains_the_quick_recipe_and_spends_the_budget(tmp_path, ray_cluster):
    """`make train-swe-quick`'s config with GRPO and VIGOR (async, streaming rounds), cut to
    two steps of 2 prompts x 4 rollouts with no warm start or evaluation. The random policy
    solves nothing: every reward is 0, every variance ties, and the tie goes to the first
    prompt, so each batch is 2 + 6 rollouts."""
    config = load_config(
        "configs/train_swe_quick.yaml",
        [f"run.output_dir={tmp_path}", "run.name=vigor", "algorithm.name=grpo", "algorithm.group_size=4",
         "algorithm.allocation=vigor", "run.steps=2", "orchestrator.episodes_per_step=2", "warm_start.steps=0",
         "evaluation.episodes=0", "rollout.max_new_tokens=8"],
    )  # fmt: skip
    run_dir = train(config)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert record["episodes"] == 8 and record["infra_errors"] == 0 and record["reward_mean"] == 0.0
        assert (record["rollouts_per_prompt_mean"], record["rollouts_per_prompt_max"]) == (4.0, 6)
        assert (record["nonzero_variance_fraction"], record["budget_spent"]) == (0.0, 1.0)
    state = json.loads((run_dir / "checkpoints" / "step_000002" / "state.json").read_text())
    for step in state["schedule"]["consumed"]:  # each step one whole batch: its 8 job ids
        ids = sorted(int(i) for i in step)
        assert ids == list(range(ids[0], ids[0] + 8)) and ids[0] % 8 == 0


@needs_bwrap
def test_se_rl_family_weights_are_logged_each_step_and_checkpointed(tmp_path, ray_cluster):
    """SAO with SE-RL's rebalancing on two task families, two steps, no warm start. The random
    policy solves nothing and the critic starts at 0, so every advantage is 0: both families'
    needs are 0 and their weights stay 1 (nothing to rebalance) in the metrics of every step;
    the needs are in the checkpoint the run resumes from."""
    config = load_config(
        "configs/train_swe_quick.yaml",
        [f"run.output_dir={tmp_path}", "run.name=se-rl", "algorithm.family_weights=se_rl", "run.steps=2",
         "tasks.ids=[config-env-prefix-strip,numeric-histogram-upper-edge]", "orchestrator.episodes_per_step=2",
         "warm_start.steps=0", "warm_start.critic_pretrain_steps=0", "evaluation.episodes=0",
         "rollout.max_new_tokens=8", "run.checkpoint_every=2"],
    )  # fmt: skip
    run_dir = train(config)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    seen = set()
    for record in records:  # a step reports the families met so far (async: a batch may hold one)
        weights = {k.split("/", 1)[1]: v for k, v in record.items() if k.startswith("family_weight/")}
        assert weights and set(weights.values()) == {1.0}
        seen |= set(weights)
    assert seen == {"config", "numeric"}
    state = json.loads((run_dir / "checkpoints" / "step_000002" / "state.json").read_text())
    assert state["family_weights"]["need"] == {"config": 0.0, "numeric": 0.0}


STREAM = """\
source: builtin
variants:
  - {id: numeric-histogram-upper-edge.renamed, base: numeric-histogram-upper-edge, rename: {Histogram: Bins}}
phases:
  - {name: config, steps: 1, tasks: [config-env-prefix-strip]}
  - {name: renamed, steps: 1, tasks: [numeric-histogram-upper-edge.renamed]}
  - {name: config, steps: 1}
"""


@needs_bwrap
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_task_stream_serves_each_phases_tasks_in_both_modes(tmp_path, ray_cluster, mode):
    """Three steps of the quick recipe on a three-phase stream (a renamed variant in the
    middle, the first phase returning). Sync: each step's episodes are its phase's task's.
    Async: a batch takes groups as they finish, so a step may hold the next phase's first
    group; every phase's task is still played, and only the stream's tasks are. A minute or
    more on 2 cores: three real steps on Ray, each phase's episodes in sandboxes."""
    (tmp_path / "stream.yaml").write_text(STREAM)
    config = load_config(
        "configs/train_swe_quick.yaml",
        [f"run.output_dir={tmp_path}", f"run.name=stream-{mode}", f"tasks.source=stream:{tmp_path / 'stream.yaml'}",
         f"orchestrator.mode={mode}", "run.steps=3", "orchestrator.episodes_per_step=2", "warm_start.steps=0",
         "warm_start.critic_pretrain_steps=0", "evaluation.episodes=0", "rollout.max_new_tokens=8"],
    )  # fmt: skip
    run_dir = train(config)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["phase"], r["phase_index"]) for r in records] == [(1, "config", 0), (2, "renamed", 1),
                                                                           (3, "config", 2)]  # fmt: skip
    played = [set(r["episodes_by_task"]) for r in records]
    if mode == "sync":
        assert played == [
            {"config-env-prefix-strip"},
            {"numeric-histogram-upper-edge.renamed"},
            {"config-env-prefix-strip"},
        ]
    else:
        assert set().union(*played) == {"config-env-prefix-strip", "numeric-histogram-upper-edge.renamed"}
    state = json.loads((run_dir / "checkpoints" / "step_000003" / "state.json").read_text())
    assert state["schedule"]["picker"]["picked_in"]["renamed"] == 2


def test_group_algorithms_refuse_single_rollouts():
    from trainer.config import ConfigError

    with pytest.raises(ConfigError, match="'algorithm.group_size'"):
        load_config(None, ["algorithm.name=grpo"])


@needs_bwrap
def test_pac_curriculum_state_is_checkpointed_and_resumed(tmp_path, ray_cluster):
    """A minute or more on 2 cores: two real training runs on Ray (one step, then a resume),
    since the curriculum's state must go through a real checkpoint and back."""
    common = [f"run.output_dir={tmp_path}", "run.name=pac", "tasks.curriculum=pac", "orchestrator.episodes_per_step=2",
              "rollout.max_turns=1", "rollout.max_new_tokens=8", "run.checkpoint_every=1"]  # fmt: skip
    run_dir = train(load_config(None, [*common, "run.steps=1"]))
    from tasks import builtin_tasks

    families = {t.family for t in builtin_tasks()}
    state = json.loads((run_dir / "checkpoints" / "step_000001" / "state.json").read_text())
    assert set(state["curriculum"]["families"]) == families
    assert sum(f["count"] > 0 for f in state["curriculum"]["families"].values()) >= 1  # it observed a batch
    record = json.loads((run_dir / "metrics.jsonl").read_text())
    assert set(record["curriculum"]) == families
    train(load_config(None, [*common, "run.steps=2", f"run.resume={run_dir / 'checkpoints' / 'step_000001'}"]))
    resumed = json.loads((run_dir / "checkpoints" / "step_000002" / "state.json").read_text())
    assert resumed["curriculum"] != state["curriculum"]  # updated after the resumed step


@needs_bwrap
@pytest.mark.parametrize(("algorithm", "scorer"), [("sao", "value"), ("grpo", "heuristic")])
def test_tree_rollouts_train_with_sao_and_grpo(tmp_path, ray_cluster, algorithm, scorer):
    config = load_config(
        None,
        [f"run.output_dir={tmp_path}", f"run.name={algorithm}", f"algorithm.name={algorithm}", "algorithm.group_size=2", "run.steps=1",
         "orchestrator.episodes_per_step=1", "rollout.max_turns=2", "rollout.max_new_tokens=8", "rollout.kind=tree", "rollout.tree.branches=2",
         "rollout.tree.expand_every=1", f"rollout.tree.scorer={scorer}"],
    )  # fmt: skip
    record = json.loads((train(config) / "metrics.jsonl").read_text())
    assert record["episodes"] == 4  # 2 trees x 2 branches, one group
    assert record["version"] + record["skipped_no_signal"] == 1  # applied, or no signal in it
    assert record["model_tokens"] < record["tokens"]  # tree rollouts train tree-packed: prefixes once


@needs_bwrap
def test_warm_start_on_gold_trajectories_lowers_their_loss(tmp_path, ray_cluster, caplog):
    caplog.set_level(logging.INFO, logger="trainer")
    from tasks import builtin_tasks

    first = builtin_tasks()[0].id
    config = load_config(
        None,
        [f"run.output_dir={tmp_path}", "run.name=warm", f"tasks.ids=[{first}]", "warm_start.steps=3", "run.steps=1",
         "orchestrator.episodes_per_step=1", "rollout.max_turns=1", "rollout.max_new_tokens=8", "evaluation.episodes=2"],
    )  # fmt: skip
    run_dir = train(config)
    record = json.loads((run_dir / "metrics.jsonl").read_text())
    out = caplog.text
    summary = json.loads((run_dir / "summary.json").read_text())  # the same seeds before and after RL
    for when in ("before", "after"):
        assert summary[f"eval_{when}"]["episodes"] == 2 and set(summary[f"eval_{when}"]["per_task"]) == {first}
        assert f"evaluation {when} RL" in out
    assert summary["eval_rise"] == summary["eval_after"]["success_rate"] - summary["eval_before"]["success_rate"]
    assert "warm start on 1 gold trajectories (1 resolved)" in out
    before, after = (float(x) for x in out.split("loss ")[1].split(" in ")[0].split(" -> "))
    assert after < before
    # The warm start published version 1, RL's first step version 2 (unless it had no signal).
    assert record["version"] + record["skipped_no_signal"] == 2
    # P(the gold actions) after the update, recomputed here from the final checkpoint's export.
    from trainer.build import sandbox_factory
    from trainer.inference.models import load_policy
    from trainer.learner import token_logprobs
    from trainer.recipes.phases import demonstrations

    (gold,) = demonstrations([t for t in builtin_tasks() if t.id == first], config, sandbox_factory("local"))
    policy = load_policy(str(run_dir / "checkpoints" / "step_000001" / "policy")).eval()
    ids = torch.tensor([gold.token_ids])
    with torch.no_grad():
        logp = token_logprobs(policy, ids, torch.ones_like(ids))[0]
    mask = torch.tensor(gold.policy_mask[1:])
    assert record["gold_probability"] == round(float(torch.exp((logp * mask).sum())), 5)


@needs_bwrap
def test_the_multi_turn_recipe_plays_and_reports_turns(tmp_path, ray_cluster, caplog):
    """`configs/train_swe.yaml` (the multi-turn default) at a tiny scale: the warm start imitates a five-turn
    gold trajectory played through the agent's tools, episodes take several turns with the
    sandbox's observations between them, and summary.json and the metrics report turns.
    Over 60 s on 2 cores: the real recipe (warm start, multi-turn episodes in sandboxes, Ray)."""
    from pathlib import Path

    caplog.set_level(logging.INFO, logger="trainer")
    config = load_config(
        Path(__file__).parents[1] / "configs" / "train_swe.yaml",
        [f"run.output_dir={tmp_path}", "run.name=mt", "tasks.ids=[text-dedent-whitespace-lines]", "run.steps=1",
         "warm_start.steps=30", "warm_start.critic_pretrain_steps=1", "orchestrator.episodes_per_step=2",
         "orchestrator.episodes_per_worker=1", "evaluation.episodes=2"],
    )  # fmt: skip
    run_dir = train(config)
    assert "warm start on 1 gold trajectories (1 resolved)" in caplog.text
    (record,) = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert record["episodes"] == 2 and record["turns_mean"] >= 1 and record["sampled_entropy"] > 0
    summary = json.loads((run_dir / "summary.json").read_text())
    for when in ("before", "after"):
        result = summary[f"eval_{when}"]
        assert sum(cell["episodes"] for cell in result["by_turns"].values()) == result["episodes"] == 2
        turns = [int(k) for k, cell in result["by_turns"].items() for _ in range(cell["episodes"])]
        assert result["turns_mean"] == sum(turns) / 2 and max(turns) <= 6
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    roles = [m["role"] for m in samples[0]["transcript"]]
    assert roles.count("assistant") == samples[0]["turns"]  # every turn answered by an observation
    assert roles.count("tool") in (samples[0]["turns"], samples[0]["turns"] - 1)
