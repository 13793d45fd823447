"""`evals.config`: `EvalConfig` is the one source of every option of `python -m evals.swe`:
its flags, `--help`, `--config FILE.yaml` and `evaluate`'s defaults all come from it."""

import inspect
import re
import shlex
from pathlib import Path

import pytest

from evals.config import SECTIONS, ConfigError, EvalConfig, config_from_argv, flag_of, load_config
from evals.swe import evaluate, main

ROOT = Path(__file__).parent.parent.parent


def _parse(argv: list[str]) -> EvalConfig:
    return config_from_argv(argv, prog="python -m evals.swe", description="test")


def test_every_field_has_a_docstring_and_one_help_section():
    for name, field in EvalConfig.model_fields.items():
        assert field.description and len(field.description) > 10, f"{name} has no docstring"
    grouped = [name for names in SECTIONS.values() for name in names]
    assert sorted(grouped) == sorted(EvalConfig.model_fields)  # each field once


def test_help_says_what_it_does_and_lists_every_field_with_its_docstring_and_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    before_options = text.split("\noptions:")[0]
    assert "run an agent on SWE tasks" in before_options
    assert "example:\n  python -m evals.swe --model gold" in before_options
    flat = " ".join(text.split())  # help text is wrapped
    for name, field in EvalConfig.model_fields.items():
        assert flag_of(name) in text, name
        assert " ".join(field.description.split())[:40] in flat, name
    assert "--config FILE.yaml" in text
    assert "(default: 30)" in flat and "(default: runs/eval-swe)" in flat and "(default: 1800)" in flat


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


def test_config_file_then_flags_override_it(tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text(
        "model: gold\nworkers: 3\nvalidate_gold: true\ninstances: [a, b]\nharness_pull: true\n"
        "output: runs/x\nmax_turns: 7\n"
    )
    config = _parse(["--config", str(path), "--workers", "2", "--no-validate-gold", "--max-turns", "9"])
    assert (config.model, config.instances, config.harness_pull) == ("gold", ["a", "b"], True)  # the file
    assert (config.workers, config.validate_gold, config.max_turns) == (2, False, 9)  # flags win
    assert config.output == Path("runs/x") and config.engine == "hf"  # the file, then the defaults
    assert _parse(["--instances", "a, b,"]).instances == ["a", "b"]
    assert _parse(["--instances", ""]).instances == []  # `make eval-swe` without INSTANCES: all


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--workers", "two"], "--workers 'two': Input should be a valid integer"),
        (["--workers", "0"], "--workers '0': Input should be greater than 0"),
        (["--engine", "tgi"], "--engine 'tgi': Input should be 'hf', 'openai' or 'vllm'"),
        (["--max-turns"], "argument --max-turns: expected one argument"),
        (["--turns", "3"], "unrecognized arguments: --turns 3"),
    ],
)
def test_a_bad_flag_is_one_line_naming_it_and_exit_code_2(argv, named, tmp_path, capsys):
    assert main([*argv, "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and named in err
    assert "Traceback" not in err


def test_a_bad_config_file_names_the_file_and_field(tmp_path, capsys):
    path = tmp_path / "eval.yaml"
    path.write_text("workers: -1\ngrader: best\nturns: 3\n")
    assert main(["--config", str(path), "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{path}: field 'workers': Input should be greater than 0" in err
    assert f"{path}: field 'grader': Input should be 'auto', 'project' or 'official'" in err
    assert f"{path}: field 'turns': unknown field" in err
    path.write_text("workers: [1\n")
    assert main(["--config", str(path), "--output", str(tmp_path)]) == 2
    assert f"{path}: not valid YAML" in capsys.readouterr().err
    # A flag that fixes the file's bad value wins: only what is left is reported.
    path.write_text("workers: -1\n")
    with pytest.raises(ConfigError, match=r"--seed 'x'") as error:
        _parse(["--config", str(path), "--workers", "2", "--seed", "x"])
    assert "workers" not in str(error.value)
