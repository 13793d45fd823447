"""The user flows end to end: a few training steps, then an evaluation of the checkpoint."""

import json

import pytest

from evals.swe import evaluate
from tests.conftest import needs_bwrap
from trainer.config import load_config
from trainer.train import train


@needs_bwrap
def test_train_then_evaluate_the_checkpoint(tmp_path, ray_cluster):
    config = load_config(
        None,
        [
            f"output_dir={tmp_path}",
            "run_name=e2e",
            "steps=2",
            "episodes_per_step=2",
            "max_turns=2",
            "max_new_tokens=16",
            "lr=1e-4",
            "critic_lr=1e-4",
            "critic_pretrain_steps=2",
        ],
    )
    run_dir = train(config)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert record["episodes"] == 2 and record["infra_errors"] == 0
        assert 0.0 <= record["success_rate"] <= 1.0 and record["policy_tokens"] > 0
        assert {"policy_loss", "value_loss", "masked_low_fraction", "masked_high_fraction"} <= set(record)
    assert (run_dir / "metrics.png").stat().st_size > 0
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    checkpoint = run_dir / "checkpoints" / "step_000002"
    state = json.loads((checkpoint / "state.json").read_text())
    assert (state["version"], state["skipped_steps"], state["step"]) == (2, 0, 2)
    assert len(sum(state["schedule"]["consumed"], [])) == 4

    from tasks import builtin_tasks

    first = builtin_tasks()[0].id
    summary = evaluate(
        model=str(checkpoint / "policy"),
        dataset="builtin",
        output=tmp_path / "eval",
        instances=[first],
        max_turns=2,
        max_new_tokens=16,
    )
    assert summary["instances"] == 1 and summary["error"] == 0
    prediction = json.loads((tmp_path / "eval" / "predictions.jsonl").read_text())
    assert prediction["instance_id"] == first and prediction["model_name_or_path"].endswith("policy")

    # Resuming from the checkpoint continues the step count.
    resumed = load_config(
        None,
        [
            f"output_dir={tmp_path}",
            "run_name=e2e",
            "steps=3",
            "episodes_per_step=1",
            "max_turns=1",
            "max_new_tokens=8",
            f"resume={checkpoint}",
        ],
    )
    train(resumed)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3] and records[-1]["version"] == 3


@needs_bwrap
def test_group_algorithm_with_value_free_learner_runs(tmp_path, ray_cluster):
    config = load_config(
        None,
        [f"output_dir={tmp_path}", "run_name=grpo", "algorithm=grpo", "group_size=2", "steps=1",
         "episodes_per_step=1", "max_turns=1", "max_new_tokens=8"],
    )  # fmt: skip
    run_dir = train(config)
    record = json.loads((run_dir / "metrics.jsonl").read_text())
    assert record["episodes"] == 2 and record["version"] == 1 and "value_loss" in record


def test_group_algorithms_refuse_single_rollouts():
    from trainer.config import ConfigError

    with pytest.raises(ConfigError, match="'group_size'"):
        load_config(None, ["algorithm=grpo"])


@needs_bwrap
def test_pac_curriculum_state_is_checkpointed_and_resumed(tmp_path, ray_cluster):
    common = [f"output_dir={tmp_path}", "run_name=pac", "curriculum=pac", "episodes_per_step=2",
              "max_turns=1", "max_new_tokens=8", "checkpoint_every=1"]  # fmt: skip
    run_dir = train(load_config(None, [*common, "steps=1"]))
    from tasks import builtin_tasks

    families = {t.family for t in builtin_tasks()}
    state = json.loads((run_dir / "checkpoints" / "step_000001" / "state.json").read_text())
    assert set(state["curriculum"]["families"]) == families
    assert sum(f["count"] > 0 for f in state["curriculum"]["families"].values()) >= 1  # it observed a batch
    record = json.loads((run_dir / "metrics.jsonl").read_text())
    assert set(record["curriculum"]) == families
    train(load_config(None, [*common, "steps=2", f"resume={run_dir / 'checkpoints' / 'step_000001'}"]))
    resumed = json.loads((run_dir / "checkpoints" / "step_000002" / "state.json").read_text())
    assert resumed["curriculum"] != state["curriculum"]  # updated after the resumed step


@needs_bwrap
@pytest.mark.parametrize(("algorithm", "scorer"), [("sao", "value"), ("grpo", "heuristic")])
def test_tree_rollouts_train_with_sao_and_grpo(tmp_path, ray_cluster, algorithm, scorer):
    config = load_config(
        None,
        [f"output_dir={tmp_path}", f"run_name={algorithm}", f"algorithm={algorithm}", "group_size=2", "steps=1",
         "episodes_per_step=1", "max_turns=2", "max_new_tokens=8", "rollout=tree", "tree_branches=2",
         "tree_expand_every=1", f"tree_scorer={scorer}"],
    )  # fmt: skip
    record = json.loads((train(config) / "metrics.jsonl").read_text())
    assert record["episodes"] == 4 and record["version"] == 1  # 2 trees x 2 branches, one group


@needs_bwrap
def test_warm_start_on_gold_trajectories_lowers_their_loss(tmp_path, ray_cluster, capsys):
    from tasks import builtin_tasks

    first = builtin_tasks()[0].id
    config = load_config(
        None,
        [f"output_dir={tmp_path}", "run_name=warm", f"task_ids=[{first}]", "warm_start_steps=3", "steps=1",
         "episodes_per_step=1", "max_turns=1", "max_new_tokens=8", "eval_episodes=2"],
    )  # fmt: skip
    run_dir = train(config)
    record = json.loads((run_dir / "metrics.jsonl").read_text())
    out = capsys.readouterr().out
    summary = json.loads((run_dir / "summary.json").read_text())  # the same seeds before and after RL
    for when in ("before", "after"):
        assert summary[f"eval_{when}"]["episodes"] == 2 and set(summary[f"eval_{when}"]["per_task"]) == {first}
        assert f"evaluation {when} RL" in out
    assert summary["eval_rise"] == summary["eval_after"]["success_rate"] - summary["eval_before"]["success_rate"]
    assert "warm start on 1 gold trajectories (1 resolved)" in out
    before, after = (float(x) for x in out.split("loss ")[1].split(" in ")[0].split(" -> "))
    assert after < before
    assert record["version"] == 2  # the warm start published version 1, RL's first step version 2
    assert 0.0 <= record["gold_probability"] <= 1.0  # P(the gold actions) after each update
