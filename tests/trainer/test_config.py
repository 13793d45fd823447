from pathlib import Path

import pytest

from trainer.config import ConfigError, TrainConfig, load_config

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    config = load_config(path)
    assert isinstance(config, TrainConfig)


def test_shipped_configs_include_cpu_demo_and_gpu_scale():
    names = {p.name for p in CONFIGS}
    assert {"train_swe.yaml", "train_swe_gpu.yaml"} <= names
    gpu = load_config(Path(CONFIGS[0]).parent / "train_swe_gpu.yaml")
    assert (gpu.engine, gpu.sandbox_backend) == ("vllm", "docker") and gpu.model != "tiny"


def test_overrides_are_typed():
    config = load_config(None, ["steps=7", "lr=3e-4", "task_ids=[a, b]", "resume=null"])
    assert config.steps == 7 and config.lr == 3e-4 and config.task_ids == ["a", "b"] and config.resume is None


def test_errors_name_the_file_and_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("steps: -1\nengine: tpu\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(path) in str(error.value) and "'steps'" in str(error.value) and "'engine'" in str(error.value)
    with pytest.raises(ConfigError, match="unknown field 'stepz'"):
        load_config(None, ["stepz=1"])
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(None, ["steps"])


def test_every_field_is_documented():
    undocumented = [name for name, field in TrainConfig.model_fields.items() if not field.description]
    assert not undocumented


def test_value_scored_trees_need_a_critic():
    with pytest.raises(ConfigError, match="'tree_scorer'.*sapo has none"):
        load_config(None, ["algorithm=sapo", "rollout=tree"])
    assert load_config(None, ["algorithm=sapo", "rollout=tree", "tree_scorer=heuristic"]).rollout == "tree"


def test_help_lists_every_field_and_bad_input_is_one_line(capsys):
    from trainer.config import TrainConfig
    from trainer.train import main

    main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m trainer.train [CONFIG.yaml] [field=value ...]")
    assert "example: python -m trainer.train configs/train_swe.yaml" in out
    assert all(f"\n  {name}=" in out for name in TrainConfig.model_fields)
    with pytest.raises(SystemExit) as exit_info:
        main(["missing.yaml"])
    assert str(exit_info.value).startswith("trainer.train: missing.yaml: cannot read:")
    with pytest.raises(SystemExit) as exit_info:
        main(["stepz=3"])
    assert str(exit_info.value) == "trainer.train: override 'stepz=3': unknown field 'stepz'"
