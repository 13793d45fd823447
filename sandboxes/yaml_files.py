"""One YAML loader and one error format for every file a user writes: training and
evaluation configs (`configs/*.yaml`, `--config`), task definitions (`task.yaml`) and sandbox
definitions (`sandboxes/images/*.yaml`); and the one way a config is loaded, `load_config`:
a typed (pydantic) model of sections, read from YAML, with `section.field=value` overrides
from the command line laid over it.

It lives in the lowest layer so that every layer above can share it. Errors are one line
that names the file (or the override) and the field, and says what is wrong:

    configs/x.yaml: field 'learner.lr': Input should be greater than 0
    override 'run.steps=-1': field 'run.steps': Input should be greater than or equal to 0
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

M = TypeVar("M")


class FileFormatError(ValueError):
    """A user-written YAML file (or a command-line override) is unreadable or invalid. The
    message is one line: the file, the field, the problem."""


def load_mapping(path: str | Path, error: type[Exception] = FileFormatError) -> dict[str, Any]:
    """The top-level mapping of the YAML file at `path`; `error(message)` for a file that is
    missing, unreadable, not YAML or not a mapping (an empty file is an empty mapping)."""
    import yaml

    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise error(f"{path}: expected a mapping of fields, got {type(raw).__name__}")
    return raw


def field_problems(exc: Any, prefix: str = "") -> str:
    """A pydantic `ValidationError` as `field 'a.b': message; field 'c': message`, with the
    fields' dotted paths (under `prefix`, when the model validated a sub-mapping)."""
    return "; ".join(field_problem(error, prefix) for error in exc.errors())


def field_problem(error: dict, prefix: str = "") -> str:
    """One error of a pydantic `ValidationError.errors()` as `field 'a.b': message`."""
    location = _location(error, prefix)
    message = error["msg"]
    # A model's and a (pydantic) dataclass's word for a field the schema does not have.
    if error.get("type") in ("extra_forbidden", "unexpected_keyword_argument"):
        message = "unknown field"
    return f"field '{location}': {message}" if location else message


def _location(error: dict, prefix: str = "") -> str:
    parts = (*(prefix.split(".") if prefix else ()), *error["loc"])
    return ".".join(str(part) for part in parts)


def parse_value(text: str) -> Any:
    """A command-line override's value, read as YAML (`3e-4`, `true`, `[a, b]`); the empty
    string stays a string."""
    import yaml

    if text == "":
        return ""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


# -- typed configs: a YAML file of sections, `section.field=value` overrides --------------------


class ConfigError(FileFormatError):
    """A config file or override is invalid; the message is one line naming the field."""


@dataclass(frozen=True)
class Override:
    """One value given on the command line for the dotted field `field`; `source` is how
    the user gave it, as an error names it (`override 'run.steps=2'`, `--workers '2'`)."""

    field: str
    value: Any
    source: str


def parse_override(item: str, example: str = "run.steps=20") -> Override:
    """`section.field=value` (the value read as YAML: `3e-4`, `true`, `[a, b]`)."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {item!r}: expected section.field=value, e.g. {example}")
    return Override(key, parse_value(value), f"override {item!r}")


def leaf_fields(model: type, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted name, pydantic field) of every leaf field of `model`, in declaration order."""
    from pydantic import BaseModel

    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from leaf_fields(annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", field


def _suggest(key: str, schema: type, command: str, aliases: dict[str, str]) -> str:
    leaf = key.rsplit(".", 1)[-1]
    matches = [name for name, _ in leaf_fields(schema) if name.rsplit(".", 1)[-1] == leaf]
    if key in aliases and aliases[key] not in matches:
        matches.append(aliases[key])
    return f" (did you mean {' or '.join(matches)}?)" if matches else f" ({command} --help lists them)"


def apply_override(
    raw: dict, override: Override, schema: type, command: str, aliases: dict[str, str] | None = None
) -> None:
    """Set `override` in the raw (not yet validated) mapping of `schema`'s sections; an
    unknown field is one line with the fields of the same name (or that `aliases`, other
    names of fields, give it), or where they are listed."""
    known = {name for name, _ in leaf_fields(schema)} | set(schema.model_fields)
    if override.field not in known:
        hint = _suggest(override.field, schema, command, aliases or {})
        raise ConfigError(f"{override.source}: unknown field {override.field!r}{hint}")
    *path, last = override.field.split(".")
    node = raw
    for part in path:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{override.source}: {part!r} is not a section")
        node = child
    node[last] = override.value


def load_config(
    schema: type[M],
    path: str | Path | None,
    overrides: Sequence[str | Override] = (),
    *,
    command: str,
    check: Callable[[M, str], M] | None = None,
    aliases: dict[str, str] | None = None,
) -> M:
    """The YAML file at `path` (sections as in `schema`; none: the defaults) with `overrides`
    (`section.field=value` strings, or `Override`s an entry point made of its flags) laid
    over it in order, validated as `schema`; then `check(config, where)`, for rules between
    sections. Every problem is one `ConfigError` line: the override that gave the value, or
    else the file (`defaults` without one), then the dotted field. `command` is the entry
    point, whose `--help` lists the fields; `aliases` (other name -> dotted field) are
    suggested for an unknown field of that name."""
    from pydantic import ValidationError

    raw: dict = load_mapping(path, ConfigError) if path is not None else {}
    where = str(path) if path is not None else "defaults"
    given: dict[str, Override] = {}
    example = next(f"{name}={field.get_default(call_default_factory=True)}" for name, field in leaf_fields(schema))
    for item in overrides:
        override = item if isinstance(item, Override) else parse_override(item, example)
        apply_override(raw, override, schema, command, aliases)
        given[override.field] = override
    try:
        config = schema.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{_source(_location(error), given, where)}: {field_problem(error)}" for error in exc.errors()]
        raise ConfigError("; ".join(problems)) from None
    return check(config, where) if check is not None else config


def _source(location: str, given: dict[str, Override], where: str) -> str:
    """Who gave the value at `location`: the most specific override that set it, else `where`."""
    setters = [field for field in given if location == field or location.startswith(f"{field}.")]
    return given[max(setters, key=len)].source if setters else where
