"""Typed configuration of `make eval-swe` (`python -m evals.swe`): the one place every
option of an evaluation and its default are stated.

The model is flat on purpose: the command line's flags are flat (`--model`, `--workers`,
as `make eval-swe` and the READMEs use them), so a flat model keeps one vocabulary: a
field, its flag (`max_turns` is `--max-turns`) and its key in a `--config` YAML file are
the same word. For reading, `SECTIONS` groups the fields by component, as `--help` shows
them: the model and its engine, the agent's limits, the tasks, grading, the run.

`load_config(path, flags)` reads an optional YAML file and lays the flags given on the
command line over it; errors are one line naming the file and field, or the flag, in the
format of `sandboxes.yaml_files`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal, NoReturn, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sandboxes.yaml_files import field_problems, load_mapping

GRADERS = ("auto", "project", "official")


class ConfigError(ValueError):
    """A config file or flag is invalid; the message is one line naming the field or flag."""


class EvalConfig(BaseModel):
    """Everything `evals.swe.evaluate` needs to know about one evaluation run."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, protected_namespaces=(), frozen=True)

    # -- the model and its engine
    model: str = "tiny"
    """Model name or folder (`tiny`: the shipped random model), or an oracle: `gold` submits
    the gold patch, `empty` nothing (runs that check grading)."""
    engine: Literal["hf", "openai", "vllm"] = "hf"
    """Inference backend: `hf` (transformers, CPU), `openai` (any compatible server, see
    `base_url`) or `vllm` (starts `vllm serve` for the run)."""
    base_url: str | None = None
    """`engine: openai`: the server, e.g. http://localhost:8000/v1."""
    tokenizer: str | None = None
    """Tokenizer name or folder; none: the model's own."""
    serve_args: str = ""
    """`engine: vllm`: extra `vllm serve` arguments."""

    # -- the agent
    max_turns: int = Field(default=30, gt=0)
    """Agent turns per instance."""
    max_new_tokens: int = Field(default=256, gt=0)
    """Tokens the model may generate in one turn."""
    max_total_tokens: int = Field(default=16384, gt=0)
    """Tokens (prompt, actions and observations) per instance before the episode is truncated."""
    temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature (0: greedy)."""
    seed: int = 0
    """Sampling seed; instance i samples with seed + i, so results do not depend on `workers`."""

    # -- the tasks
    dataset: str = "builtin"
    """`builtin`, a task folder, a SWE-bench .jsonl, or `verified` (the Hugging Face dataset)."""
    instances: list[str] = Field(default_factory=list)
    """Only these instance ids (comma-separated on the command line; all when empty)."""
    repo_cache: Path | None = None
    """Folder of git clones (DIR/owner__name or DIR/owner/name): SWE-bench rows run from their
    repository at base_commit, in an environment built with pip for `sandbox`."""
    quarantine: Path | None = None
    """A quarantine.json whose instances are left out of every count."""
    predictions: Path | None = None
    """Grade this predictions.jsonl (SWE-bench's format, e.g. OpenHands') instead of running a model."""

    # -- grading
    grader: Literal[GRADERS] = "auto"  # type: ignore[valid-type]
    """`auto`: the official SWE-bench harness where it can run, the project's sandbox grader
    elsewhere; `project` or `official`: only that one."""
    sandbox: Literal["local", "docker"] = "local"
    """Where agents and the project grader run: `local` (bubblewrap) or `docker`."""
    harness_pull: bool = False
    """Let the official harness pull missing images."""
    harness_timeout: int = Field(default=1800, gt=0)
    """Official harness: seconds per test run."""
    validate_gold: bool = False
    """Run the gold patches, rerun gold failures and quarantine flaky instances (`model` is then `gold`)."""
    reruns: int = Field(default=2, ge=0)
    """`validate_gold`: reruns of each gold failure."""

    # -- the run
    output: Path = Path("runs/eval-swe")
    """Folder the run is written to; a rerun with the same folder resumes it."""
    workers: int = Field(default=1, gt=0)
    """Instances run in parallel (threads); also how many environments (one per (repo, version)
    spec) build at once with --repo-cache."""
    keep_errors: bool = False
    """On resume, do not retry instances that ended in an error."""

    @field_validator("instances", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):  # `--instances a,b` (and `make eval-swe INSTANCES=` gives "")
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    def agent_options(self) -> dict[str, Any]:
        """The part an agent solver takes (`evals.runner.AgentSolver`)."""
        fields = ("engine", "base_url", "tokenizer", "max_turns", "max_new_tokens", "max_total_tokens")
        return {name: getattr(self, name) for name in (*fields, "temperature", "seed")}


# How `--help` groups the fields (each field once; a test checks it).
SECTIONS: dict[str, tuple[str, ...]] = {
    "model and engine": ("model", "engine", "base_url", "tokenizer", "serve_args"),
    "agent": ("max_turns", "max_new_tokens", "max_total_tokens", "temperature", "seed"),
    "tasks": ("dataset", "instances", "repo_cache", "quarantine", "predictions"),
    "grading": ("grader", "sandbox", "harness_pull", "harness_timeout", "validate_gold", "reruns"),
    "run": ("output", "workers", "keep_errors"),
}


def flag_of(field: str) -> str:
    """The command-line flag of a field: `max_turns` is `--max-turns`."""
    return "--" + field.replace("_", "-")


def load_config(path: str | Path | None = None, flags: dict[str, Any] | None = None) -> EvalConfig:
    """The YAML file at `path` (fields as in `EvalConfig`), with `flags` (field -> value, as
    given on the command line) laid over it. A problem is one line: the flag when a flag
    gave the value, else the file (or `defaults`) and the field."""
    raw: dict[str, Any] = load_mapping(path, ConfigError) if path is not None else {}
    flags = flags or {}
    try:
        return EvalConfig.model_validate({**raw, **flags})
    except ValidationError as exc:
        where = str(path) if path is not None else "defaults"
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            if field in flags:
                problems.append(f"{flag_of(field)} {flags[field]!r}: {error['msg']}")
            else:
                problems.append(f"{where}: {field_problems(_One(error))}")
        raise ConfigError("; ".join(problems)) from None


class _One:
    """One pydantic error, shaped as `field_problems` reads a `ValidationError` (so a file's
    problems read as they do for every other YAML file)."""

    def __init__(self, error: dict) -> None:
        self._error = error

    def errors(self) -> list[dict]:
        return [self._error]


# -- the command line, generated from the model ------------------------------------------------

USAGE_EXAMPLE = "python -m evals.swe --model gold --instances ID,ID --workers 4"


METAVARS = {"model": "NAME", "base_url": "URL", "tokenizer": "NAME", "serve_args": "ARGS", "dataset": "SOURCE",
            "instances": "ID,ID", "repo_cache": "DIR", "quarantine": "PATH", "predictions": "PATH",
            "harness_timeout": "SECONDS", "output": "DIR"}  # fmt: skip


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not usage + error
        raise ConfigError(f"{message} ({self.prog} --help lists the options)")


def _metavar(field: str, annotation: Any) -> str | None:
    choices = [arg for arg in get_args(annotation) if isinstance(arg, str)]
    if get_origin(annotation) is Literal:
        return "{" + ",".join(choices) + "}"
    return METAVARS.get(field) or {int: "N", float: "X"}.get(annotation, "TEXT")


def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Every field of `EvalConfig` as a flag (help: the field's docstring and default), plus
    `--config FILE.yaml`. Flags have no defaults of their own: a flag not given is not in
    the result, so the defaults are `EvalConfig`'s and a config file's values stand."""
    parser = _Parser(
        prog=prog,
        usage=f"{prog} [--config FILE.yaml] [--FIELD VALUE ...]",
        description=f"{description}\n\nexample:\n  {USAGE_EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--config", metavar="FILE.yaml", help="a YAML file of these fields (snake_case keys); flags override it"
    )
    fields = EvalConfig.model_fields
    grouped = [name for names in SECTIONS.values() for name in names]
    sections = {**SECTIONS, "other": tuple(name for name in fields if name not in grouped)}
    for title, names in sections.items():
        group = parser.add_argument_group(title) if names else None
        for name in names:
            field = fields[name]
            default = field.get_default(call_default_factory=True)
            shown = ",".join(default) if isinstance(default, list) else default
            text = " ".join((field.description or "").split()).replace("%", "%%")
            help_text = f"{text} (default: {shown if shown not in (None, '') else 'none'})"
            if field.annotation is bool:
                group.add_argument(flag_of(name), dest=name, action=argparse.BooleanOptionalAction, help=help_text)
            else:
                group.add_argument(flag_of(name), dest=name, metavar=_metavar(name, field.annotation), help=help_text)
    return parser


def config_from_argv(argv: list[str] | None, prog: str, description: str) -> EvalConfig:
    """Parse a command line into a validated `EvalConfig` (`ConfigError`: one line)."""
    args = vars(build_parser(prog, description).parse_args(argv))
    path = args.pop("config", None)
    return load_config(path, args)
