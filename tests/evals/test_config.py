"""`evals.config`: `EvalConfig` is the one source of every option of `python -m evals.swe`:
its sections, `section.field=value` overrides (as training takes them), flag aliases,
`--help`, a YAML file and `evaluate`'s defaults all come from it; the agent's limits are
the ones training states (`agent_env.limits`)."""

import inspect
import re
import shlex
from pathlib import Path

import pytest

from agent_env.limits import LIMITS, AgentLimits
from evals.config import ALIASES, ConfigError, EvalConfig, config_from_argv, flag_of, load_config
from evals.swe import evaluate, main
from sandboxes import yaml_files
from sandboxes.yaml_files import leaf_fields
from trainer.config import RolloutConfig

ROOT = Path(__file__).parent.parent.parent


def _parse(argv: list[str]) -> EvalConfig:
    return config_from_argv(argv, prog="python -m evals.swe", description="test")


def test_every_field_has_a_docstring_and_one_flag():
    fields = dict(leaf_fields(EvalConfig))
    for name, field in fields.items():
        assert field.description and len(field.description) > 10, f"{name} has no docstring"
    assert sorted(ALIASES.values()) == sorted(fields)  # every field has one flat name, each its own
    assert [flag_of(name) for name in ("model.name", "tasks.source", "tasks.ids", "tasks.sandbox_backend")] == [
        "--model", "--dataset", "--instances", "--sandbox"
    ]  # fmt: skip
    assert (flag_of("agent.max_turns"), flag_of("run.workers")) == ("--max-turns", "--workers")


def test_the_agent_limits_are_trainings_with_each_side_its_defaults():
    limits = list(LIMITS)
    assert [name for name in AgentLimits.model_fields] == limits
    for name in limits:  # one meaning and bound for both, not two restatements
        ours, theirs = EvalConfig.model_fields["agent"].annotation.model_fields[name], RolloutConfig.model_fields[name]
        assert ours.description == theirs.description == LIMITS[name]
        assert ours.metadata == theirs.metadata
    assert EvalConfig().agent.model_dump(include=set(limits)) == {"max_turns": 30, "max_new_tokens": 256,
                                                                  "max_total_tokens": 16384}  # fmt: skip
    assert RolloutConfig().model_dump(include=set(limits)) == {"max_turns": 3, "max_new_tokens": 48,
                                                               "max_total_tokens": 2048}  # fmt: skip
    with pytest.raises(ConfigError, match=r"override 'agent.max_turns=0': field 'agent.max_turns': .* greater than 0"):
        load_config(None, ["agent.max_turns=0"])


def test_help_says_what_it_does_and_lists_every_field_with_flag_dotted_name_docstring_and_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: python -m evals.swe [CONFIG.yaml] [section.field=value ...]")
    before_options = text.split("\npositional arguments:")[0]
    assert "run an agent on SWE tasks" in before_options
    assert "example:\n  python -m evals.swe --model gold" in before_options
    assert "python -m evals.swe eval.yaml model.name=gold" in before_options
    flat = " ".join(text.split()).replace("- ", "-")  # help text is wrapped (at hyphens too)
    for name, field in leaf_fields(EvalConfig):
        assert re.search(rf"{flag_of(name)}\b.*\n?\s*{re.escape(name)}: ", text), name
        assert " ".join(field.description.split())[:40] in flat, name
    assert "--config FILE.yaml" in text
    assert "(default: 30)" in flat and "(default: runs/eval-swe)" in flat and "(default: 1800)" in flat
    assert "agent.max_turns: Agent turns per episode" in flat


def test_evaluate_and_the_command_line_share_one_set_of_defaults():
    # evaluate restates no option: its parameters are the config and the test injections.
    parameters = inspect.signature(evaluate).parameters
    assert list(parameters) == ["config", "solver", "progress"]
    # Flags have no defaults of their own: an empty command line is EvalConfig's defaults.
    assert _parse([]) == EvalConfig() == load_config()
    # What `make eval-swe` passes by default is the same run.
    makefile = (ROOT / "Makefile").read_text()
    defaults = dict(re.findall(r"^(\w+) \?=[ \t]*(.*)$", makefile, flags=re.M))
    recipe = makefile.split("\neval-swe:")[1].split("\n\n")[0].split("-m evals.swe", 1)[1]
    recipe = recipe.replace("\\\n", " ")
    for key, value in defaults.items():
        recipe = recipe.replace(f"$({key})", value)
    assert _parse(shlex.split(recipe)) == EvalConfig()


def test_overrides_as_training_takes_them_and_flags_are_their_aliases(tmp_path):
    dotted = _parse(["model.name=gold", "tasks.ids=[a, b]", "tasks.sandbox_backend=docker", "agent.max_turns=5",
                     "run.workers=3", "grading.validate_gold=true"])  # fmt: skip
    flags = _parse(["--model", "gold", "--instances", "a,b", "--sandbox", "docker", "--max-turns", "5",
                    "--workers", "3", "--validate-gold"])  # fmt: skip
    assert dotted == flags
    assert (dotted.model.name, dotted.tasks.ids, dotted.tasks.sandbox_backend) == ("gold", ["a", "b"], "docker")
    assert (dotted.agent.max_turns, dotted.run.workers, dotted.grading.validate_gold) == (5, 3, True)
    # The YAML file first, then the flags, then the overrides; within each the last one wins.
    path = tmp_path / "eval.yaml"
    path.write_text("run:\n  workers: 2\nagent:\n  max_turns: 7\n")
    assert _parse([str(path), "--workers", "4", "run.workers=5", "--workers", "6"]).run.workers == 5
    assert _parse(["--config", str(path), "--workers", "4", "--workers", "6"]).run.workers == 6
    assert _parse([str(path)]).agent.max_turns == 7
    # A flag's value is the text typed; an override's is read as YAML, as training reads it.
    assert _parse(["--model", "1.5"]).model.name == "1.5"
    assert _parse(["tasks.ids=a,b"]).tasks.ids == ["a", "b"]


def test_a_config_file_of_sections_or_of_the_flat_names(tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text(
        "model:\n  name: gold\nrun:\n  workers: 3\n  output: runs/x\ngrading:\n  validate_gold: true\n"
        "  harness_pull: true\ntasks:\n  ids: [a, b]\nagent:\n  max_turns: 7\n"
    )
    config = _parse(["--config", str(path), "--workers", "2", "--no-validate-gold", "--max-turns", "9"])
    assert (config.model.name, config.tasks.ids, config.grading.harness_pull) == ("gold", ["a", "b"], True)  # file
    assert (config.run.workers, config.grading.validate_gold, config.agent.max_turns) == (2, False, 9)  # flags win
    assert config.run.output == Path("runs/x") and config.model.engine == "hf"  # the file, then the defaults
    # The flat names (the flags without `--`) work as keys, as in files written for them.
    flat = tmp_path / "flat.yaml"
    flat.write_text("model: gold\nworkers: 3\nvalidate_gold: true\ninstances: [a, b]\nharness_pull: true\n"
                    "output: runs/x\nmax_turns: 7\n")  # fmt: skip
    assert _parse([str(flat)]) == _parse([str(path)])
    assert EvalConfig(model="gold", workers=3, instances="a,b") == _parse(["model.name=gold", "run.workers=3",
                                                                          "tasks.ids=[a, b]"])  # fmt: skip
    assert _parse(["--instances", "a, b,"]).tasks.ids == ["a", "b"]
    assert _parse(["--instances", ""]).tasks.ids == []  # `make eval-swe` without INSTANCES: all
    flat.write_text("workers: 2\nrun:\n  workers: 3\n")
    with pytest.raises(ConfigError, match=rf"^{flat}: .*'workers' and run.workers name one field: give it once$"):
        load_config(flat)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--workers", "two"], "--workers 'two': field 'run.workers': Input should be a valid integer"),
        (["--workers", "0"], "--workers '0': field 'run.workers': Input should be greater than 0"),
        (["--engine", "tgi"], "--engine 'tgi': field 'model.engine': Input should be 'hf', 'openai' or 'vllm'"),
        (["run.workers=0"], "override 'run.workers=0': field 'run.workers': Input should be greater than 0"),
        (["--max-turns"], "argument --max-turns: expected one argument"),
        (["--turns", "3"], "unrecognized arguments: --turns"),
        (["workers=2"], "override 'workers=2': unknown field 'workers' (did you mean run.workers?)"),
        (["dataset=x"], "override 'dataset=x': unknown field 'dataset' (did you mean tasks.source?)"),
        (["run.worker=2"], "unknown field 'run.worker' (python -m evals.swe --help lists them)"),
        (["run.workers=2", "model.name"], "override 'model.name': expected section.field=value, e.g. model.name=tiny"),
    ],
)
def test_a_bad_flag_or_override_is_one_line_naming_it_and_exit_code_2(argv, named, tmp_path, capsys):
    assert main([*argv, "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and named in err
    assert "Traceback" not in err


def test_a_bad_config_file_names_the_file_and_field(tmp_path, capsys):
    path = tmp_path / "eval.yaml"
    path.write_text("run:\n  workers: -1\ngrading:\n  grader: best\nagent:\n  turns: 3\n")
    assert main(["--config", str(path), "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{path}: field 'run.workers': Input should be greater than 0" in err
    assert f"{path}: field 'grading.grader': Input should be 'auto', 'project' or 'official'" in err
    assert f"{path}: field 'agent.turns': unknown field" in err
    path.write_text("workers: -1\nturns: 3\n")  # flat names: the field is named by its section
    assert main([str(path), "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: field 'run.workers': Input should be greater than 0" in err
    assert f"{path}: field 'turns': unknown field" in err
    path.write_text("workers: [1\n")
    assert main(["--config", str(path), "--output", str(tmp_path)]) == 2
    assert f"{path}: not valid YAML" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="two config files"):
        _parse([str(path), "--config", str(path)])
    # A flag that fixes the file's bad value wins: only what is left is reported.
    path.write_text("run:\n  workers: -1\n")
    with pytest.raises(ConfigError, match=r"--seed 'x': field 'agent.seed'") as error:
        _parse(["--config", str(path), "--workers", "2", "--seed", "x"])
    assert "workers" not in str(error.value)


def test_one_config_error_for_every_config_file():
    # evals' ConfigError is the shared one, a FileFormatError like every user-written file's.
    assert ConfigError is yaml_files.ConfigError and issubclass(ConfigError, yaml_files.FileFormatError)
