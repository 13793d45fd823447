import subprocess
import sys
from pathlib import Path

import pytest

from trainer.config import ConfigError, TrainConfig, leaf_fields
from trainer.resolve import load_config

ROOT = Path(__file__).parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    config = load_config(path)
    assert isinstance(config, TrainConfig)


def test_shipped_configs_include_cpu_demo_and_gpu_scale():
    names = {p.name for p in CONFIGS}
    assert {"train_swe.yaml", "train_swe_gpu.yaml"} <= names
    gpu = load_config(ROOT / "configs" / "train_swe_gpu.yaml")
    assert (gpu.model.engine, gpu.tasks.sandbox_backend) == ("vllm", "docker") and gpu.model.name != "tiny"
    # The 7B run's learner knobs are reachable from the config (they were not before).
    assert (gpu.learner.bf16, gpu.learner.activation_checkpointing, gpu.placement.learner_ranks) == (True, True, 4)


def test_nested_overrides_are_typed_and_reach_every_level():
    config = load_config(
        None,
        [
            "run.steps=7",
            "learner.lr=3e-4",
            "tasks.ids=[a, b]",
            "run.resume=null",
            "rollout.tree.branches=6",
            "algorithm.sapo.beta=0.01",
            "learner.bf16=true",
            "learner.max_bad_steps=5",
        ],
    )
    assert (config.run.steps, config.learner.lr, config.tasks.ids, config.run.resume) == (7, 3e-4, ["a", "b"], None)
    assert (config.rollout.tree.branches, config.algorithm.sapo.beta) == (6, 0.01)
    assert (config.learner.bf16, config.learner.max_bad_steps) == (True, 5)
    # Untouched fields keep their defaults.
    assert config.learner.token_budget == 16384 and config.rollout.tree.children == 2


def test_an_override_replaces_a_value_from_the_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("run:\n  steps: 3\n  seed: 5\nlearner:\n  lr: 1.0e-3\n")
    config = load_config(path, ["run.steps=9"])
    assert (config.run.steps, config.run.seed, config.learner.lr) == (9, 5, 1e-3)


def test_errors_name_the_file_and_the_dotted_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("run:\n  steps: -1\nmodel:\n  engine: tpu\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and "'run.steps'" in message and "'model.engine'" in message
    assert "\n" not in message
    path.write_text("run:\n  stepz: 1\n")
    with pytest.raises(ConfigError, match=r"field 'run.stepz': unknown field"):
        load_config(path)
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match="expected a mapping of fields, got list"):
        load_config(path)


def test_an_unknown_or_flat_override_says_where_the_field_lives():
    with pytest.raises(ConfigError, match=r"unknown field 'seed' \(did you mean run.seed\?\)"):
        load_config(None, ["seed=1"])
    with pytest.raises(ConfigError, match=r"unknown field 'steps' \(did you mean run.steps or warm_start.steps\?\)"):
        load_config(None, ["steps=1"])
    with pytest.raises(ConfigError, match=r"unknown field 'lr' \(did you mean learner.lr or warm_start.lr\?\)"):
        load_config(None, ["lr=1"])
    with pytest.raises(ConfigError, match=r"unknown field 'run.stepz' \(python -m trainer.train --help lists them\)"):
        load_config(None, ["run.stepz=1"])
    with pytest.raises(ConfigError, match="expected section.field=value"):
        load_config(None, ["run.steps"])


def test_every_field_is_documented():
    undocumented = [name for name, field in leaf_fields() if not field.description]
    sections = [name for name, field in TrainConfig.model_fields.items() if not field.description]
    assert not undocumented and not sections


def test_group_methods_need_groups_and_value_scored_trees_need_a_critic():
    with pytest.raises(ConfigError, match="'algorithm.group_size': grpo compares rollouts"):
        load_config(None, ["algorithm.name=grpo"])
    assert load_config(None, ["algorithm.name=grpo", "algorithm.group_size=2"]).algorithm.group_size == 2
    with pytest.raises(ConfigError, match="'rollout.tree.scorer'.*sapo has none"):
        load_config(None, ["algorithm.name=sapo", "rollout.kind=tree"])
    config = load_config(None, ["algorithm.name=sapo", "rollout.kind=tree", "rollout.tree.scorer=heuristic"])
    assert config.rollout.kind == "tree"
    with pytest.raises(ConfigError, match="'orchestrator.deterministic'"):
        load_config(None, ["orchestrator.mode=sync", "orchestrator.deterministic=true"])


def test_vigor_allocation_is_one_override_and_bad_combinations_are_one_line():
    config = load_config(None, ["algorithm.name=grpo", "algorithm.group_size=4", "algorithm.allocation=vigor"])
    assert (config.algorithm.allocation, config.algorithm.vigor.model_dump()) == (
        "vigor",
        {"m0": 2, "alpha": 0.5, "gamma": 2.0, "rounds": 4},
    )
    assert load_config(None, []).algorithm.allocation == "fixed"
    cases = [
        (["algorithm.name=sao"], "field 'algorithm.allocation': .* sao is not one"),
        (["algorithm.name=ppo", "algorithm.group_size=4"], "field 'algorithm.allocation': .* ppo is not one"),
        (["algorithm.name=grpo", "algorithm.group_size=2", "algorithm.vigor.m0=3"], "field 'algorithm.vigor.m0'"),
        (["algorithm.name=dapo", "algorithm.group_size=4", "rollout.kind=tree", "rollout.tree.scorer=heuristic"],
         "field 'algorithm.allocation': vigor needs rollout.kind=linear"),
        (["algorithm.name=grpo", "algorithm.group_size=4", "algorithm.vigor.alpha=0"], "algorithm.vigor.alpha"),
    ]  # fmt: skip
    for overrides, message in cases:
        with pytest.raises(ConfigError, match=message) as error:
            load_config(None, [*overrides, "algorithm.allocation=vigor"])
        assert "\n" not in str(error.value)


def test_help_lists_every_field_and_bad_input_is_one_line(capsys):
    from trainer.train import main

    main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m trainer.train [CONFIG.yaml] [section.field=value ...]")
    assert "example: python -m trainer.train configs/train_swe.yaml" in out
    assert all(f"\n  {name}=" in out for name, _ in leaf_fields())
    with pytest.raises(SystemExit) as exit_info:
        main(["missing.yaml"])
    assert str(exit_info.value).startswith("trainer.train: missing.yaml: cannot read:")
    with pytest.raises(SystemExit) as exit_info:
        main(["stepz=3"])
    assert str(exit_info.value) == (
        "trainer.train: override 'stepz=3': unknown field 'stepz' (python -m trainer.train --help lists them)"
    )


def test_help_needs_no_torch():
    code = "import sys; from trainer.train import usage; usage(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_a_task_source_nothing_of_which_runs_here_is_one_line_naming_why(tmp_path):
    # A SWE-bench row with no clone in the repository cache: a TaskError (the entry point
    # prints it as one line), not a SystemExit out of library code.
    from tasks import TaskError
    from trainer.recipes.phases import load_tasks

    rows = Path(__file__).parents[1] / "fixtures" / "swebench_verified_sample.jsonl"
    config = TrainConfig.model_validate(
        {"tasks": {"source": str(rows), "ids": ["django__django-10097"], "repo_cache": str(tmp_path)}}
    )
    with pytest.raises(TaskError, match=r"^no task of tasks.source can run on this machine: .*django/django"):
        load_tasks(config)
