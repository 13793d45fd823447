"""Typed configuration of `make eval-swe` (`python -m evals.swe`): the one place every
option of an evaluation and its default are stated, in sections as training's are
(`trainer.config`), with the same words for the same things:

    model     which model (or oracle, or predictions file), served by which engine
    agent     the agent's limits (`agent_env.limits`, shared with training) and its sampling
    tasks     which tasks, in which sandboxes (`tasks.source`, `tasks.sandbox_backend`, as training)
    grading   which grader; gold validation and quarantine
    run       where the run is written, how many instances at once

The command line is training's: `python -m evals.swe [CONFIG.yaml] [section.field=value ...]`,
loaded by the one loader and error format of every config (`sandboxes.yaml_files.load_config`,
its `ConfigError`). Every field also has a flat flag, the options `make eval-swe` and the
READMEs type (`ALIASES`): `--model X` is `model.name=X`, `--max-turns 5` is
`agent.max_turns=5`, `--sandbox docker` is `tasks.sandbox_backend=docker`. The same flat
names are accepted as keys of a config file and keyword arguments (`EvalConfig(model="gold",
workers=2)`), so files and code written for the flat options keep working. The YAML file
comes first, then the flags, then the `section.field=value` overrides, each in the order
given; `--help` lists every field with its flag, dotted name and default.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal, NoReturn, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_env.limits import AgentLimits
from sandboxes.yaml_files import ConfigError, Override, leaf_fields
from sandboxes.yaml_files import load_config as load_sections

__all__ = ["ALIASES", "GRADERS", "ConfigError", "EvalConfig", "config_from_argv", "flag_of", "load_config"]

GRADERS = ("auto", "project", "official")
PROG = "python -m evals.swe"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, protected_namespaces=(), frozen=True)


class ModelConfig(_Section):
    name: str = "tiny"
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
    predictions: Path | None = None
    """Grade this predictions.jsonl (SWE-bench's format, e.g. OpenHands') instead of running a model."""


class AgentConfig(AgentLimits):
    # The limits (max_turns, max_new_tokens, max_total_tokens) and their defaults are
    # `AgentLimits`'; sampling is evaluation's own (greedy by default).
    model_config = ConfigDict(use_attribute_docstrings=True)

    temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature (0: greedy)."""
    seed: int = 0
    """Sampling seed; instance i samples with seed + i, so results do not depend on `run.workers`."""


class TasksConfig(_Section):
    source: str = "builtin"
    """`builtin`, a task folder, a SWE-bench .jsonl, or `verified` (the Hugging Face dataset)."""
    ids: list[str] = Field(default_factory=list)
    """Only these instance ids (comma-separated on the command line; all when empty)."""
    repo_cache: Path | None = None
    """Folder of git clones (DIR/owner__name or DIR/owner/name): SWE-bench rows run from their
    repository at base_commit, in an environment built with pip for `sandbox_backend`."""
    sandbox_backend: Literal["local", "docker"] = "local"
    """Where agents and the project grader run: `local` (bubblewrap) or `docker`."""

    @field_validator("ids", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):  # `--instances a,b` (and `make eval-swe INSTANCES=` gives "")
            return [part.strip() for part in value.split(",") if part.strip()]
        return value


class GradingConfig(_Section):
    grader: Literal[GRADERS] = "auto"  # type: ignore[valid-type]
    """`auto`: the official SWE-bench harness where it can run, the project's sandbox grader
    elsewhere; `project` or `official`: only that one."""
    harness_pull: bool = False
    """Let the official harness pull missing images."""
    harness_timeout: int = Field(default=1800, gt=0)
    """Official harness: seconds per test run."""
    validate_gold: bool = False
    """Run the gold patches, rerun gold failures and quarantine flaky instances (`model.name` is then `gold`)."""
    reruns: int = Field(default=2, ge=0)
    """`validate_gold`: reruns of each gold failure."""
    quarantine: Path | None = None
    """A quarantine.json whose instances are left out of every count."""


class RunConfig(_Section):
    output: Path = Path("runs/eval-swe")
    """Folder the run is written to; a rerun with the same folder resumes it."""
    workers: int = Field(default=1, gt=0)
    """Instances run in parallel (threads); also how many environments (one per (repo, version)
    spec) build at once with `tasks.repo_cache`."""
    keep_errors: bool = False
    """On resume, do not retry instances that ended in an error."""


# Flags whose name is not their field's: the options as users have always typed them.
RENAMED = {
    "model.name": "model",
    "tasks.source": "dataset",
    "tasks.ids": "instances",
    "tasks.sandbox_backend": "sandbox",
}


class EvalConfig(_Section):
    """Everything `evals.swe.evaluate` needs to know about one evaluation run."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    """The model and its engine."""
    agent: AgentConfig = Field(default_factory=AgentConfig)
    """The agent's limits and sampling."""
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    """The tasks and their sandboxes."""
    grading: GradingConfig = Field(default_factory=GradingConfig)
    """The grader, gold validation and quarantine."""
    run: RunConfig = Field(default_factory=RunConfig)
    """The run's folder and parallelism."""

    @model_validator(mode="before")
    @classmethod
    def _flat_names(cls, data: Any) -> Any:
        """`workers: 2` (a file) or `EvalConfig(model="gold")` is `run.workers` / `model.name`:
        the flags' names work as keys too. `model` is the section when it is a mapping."""
        if not isinstance(data, dict):
            return data
        nested = dict(data)
        for key, value in data.items():
            if key not in ALIASES or (key in cls.model_fields and isinstance(value, dict | BaseModel)):
                continue
            section, field = ALIASES[key].split(".")
            del nested[key]
            part = nested.get(section, {})
            part = dict(part) if isinstance(part, dict | BaseModel) else part  # a model: its fields
            if not isinstance(part, dict):
                continue  # the section's own error says what is wrong with it
            if field in part:
                raise ValueError(f"{key!r} and {section}.{field} name one field: give it once")
            nested[section] = {**part, field: value}
        return nested

    def agent_options(self) -> dict[str, Any]:
        """The part an agent solver takes (`evals.runner.AgentSolver`)."""
        model, agent = self.model, self.agent
        return {"engine": model.engine, "base_url": model.base_url, "tokenizer": model.tokenizer,
                **agent.model_dump()}  # fmt: skip


# flat name (the flag without `--`, a flat key) -> dotted field, for every field.
ALIASES: dict[str, str] = {
    RENAMED.get(name, name.rsplit(".", 1)[-1]): name for name, _ in leaf_fields(EvalConfig)
}  # fmt: skip
_FLAGS = {dotted: alias for alias, dotted in ALIASES.items()}


def flag_of(field: str) -> str:
    """The command-line flag of a dotted field: `agent.max_turns` is `--max-turns`."""
    return "--" + _FLAGS[field].replace("_", "-")


def load_config(path: str | Path | None = None, overrides: list[str | Override] = ()) -> EvalConfig:
    """The YAML file at `path` (sections as in `EvalConfig`) with `section.field=value`
    overrides (or `Override`s, which the flags become) laid over it; one `ConfigError`
    line naming the override or file and the field."""
    return load_sections(EvalConfig, path, overrides, command=PROG, aliases=ALIASES)


# -- the command line, generated from the model ------------------------------------------------

USAGE_EXAMPLES = (
    f"{PROG} --model gold --instances ID,ID --workers 4",
    f"{PROG} eval.yaml model.name=gold tasks.ids=[ID,ID] run.workers=4",
)
METAVARS = {"model.name": "NAME", "model.base_url": "URL", "model.tokenizer": "NAME", "model.serve_args": "ARGS",
            "model.predictions": "PATH", "tasks.source": "SOURCE", "tasks.ids": "ID,ID", "tasks.repo_cache": "DIR",
            "grading.quarantine": "PATH", "grading.harness_timeout": "SECONDS", "run.output": "DIR"}  # fmt: skip


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not usage + error
        raise ConfigError(f"{message} ({self.prog} --help lists the options)")


def _record(namespace: argparse.Namespace, override: Override) -> None:
    namespace.flags = [*getattr(namespace, "flags", []), override]


class _Flag(argparse.Action):
    """`--flag VALUE`: an override of the flag's dotted field, kept in command-line order.
    The value stays the text typed (no YAML reading: `--model 1.5` is a name)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        _record(namespace, Override(self.dest, values, f"{option_string} {values!r}"))


class _Switch(argparse.BooleanOptionalAction):
    """`--flag` / `--no-flag` of a boolean field."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        _record(namespace, Override(self.dest, not option_string.startswith("--no-"), option_string))


def _metavar(field: str, annotation: Any) -> str | None:
    if get_origin(annotation) is Literal:
        return "{" + ",".join(arg for arg in get_args(annotation) if isinstance(arg, str)) + "}"
    return METAVARS.get(field) or {int: "N", float: "X"}.get(annotation, "TEXT")


def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """`[CONFIG.yaml] [section.field=value ...]` as training takes them, and every field of
    `EvalConfig` as a flag (help: its dotted name, docstring and default). Nothing has a
    default of its own here: what is not given is not in the result, so the defaults are
    `EvalConfig`'s and a config file's values stand."""
    parser = _Parser(
        prog=prog,
        usage=f"{prog} [CONFIG.yaml] [section.field=value ...] [--FLAG VALUE ...]",
        description=f"{description}\n\nexample:\n" + "\n".join(f"  {line}" for line in USAGE_EXAMPLES),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "items", nargs="*", metavar="section.field=value",
        help="a field by its dotted name, as `python -m trainer.train` takes them (the value read as YAML); "
        "applied after the flags. A first item without `=` is a YAML file of these sections (CONFIG.yaml)",
    )  # fmt: skip
    parser.add_argument("--config", metavar="FILE.yaml", help="the YAML file of these sections (as CONFIG.yaml)")
    sections = {}
    for dotted, field in leaf_fields(EvalConfig):
        section = dotted.split(".")[0]
        if section not in sections:
            doc = EvalConfig.model_fields[section].description or ""
            sections[section] = parser.add_argument_group(f"{section}: {doc[:1].lower()}{doc[1:].rstrip('.')}")
        default = field.get_default(call_default_factory=True)
        shown = ",".join(default) if isinstance(default, list) else default
        text = " ".join((field.description or "").split()).replace("%", "%%")
        help_text = f"{dotted}: {text} (default: {shown if shown not in (None, '') else 'none'})"
        if field.annotation is bool:
            sections[section].add_argument(flag_of(dotted), dest=dotted, action=_Switch, help=help_text)
        else:
            metavar = _metavar(dotted, field.annotation)
            sections[section].add_argument(flag_of(dotted), dest=dotted, action=_Flag, metavar=metavar, help=help_text)
    return parser


def config_from_argv(argv: list[str] | None, prog: str = PROG, description: str = "") -> EvalConfig:
    """Parse a command line into a validated `EvalConfig` (`ConfigError`: one line)."""
    args = build_parser(prog, description).parse_intermixed_args(argv)
    items, path = list(getattr(args, "items", [])), getattr(args, "config", None)
    if items and "=" not in items[0]:
        if path is not None:
            raise ConfigError(f"two config files: {items[0]} and --config {path}; give one")
        path = items.pop(0)
    return load_config(path, [*getattr(args, "flags", []), *items])
