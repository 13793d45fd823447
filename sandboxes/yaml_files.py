"""One YAML loader and one error format for every file a user writes: training configs
(`configs/*.yaml`), task definitions (`task.yaml`) and sandbox definitions
(`sandboxes/images/*.yaml`).

It lives in the lowest layer so that every layer above can share it. Errors are one line
that names the file (or the override) and the field, and says what is wrong:

    configs/x.yaml: field 'learner.lr': Input should be greater than 0
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


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
    problems = []
    for error in exc.errors():
        parts = (*(prefix.split(".") if prefix else ()), *error["loc"])
        location = ".".join(str(part) for part in parts)
        message = error["msg"]
        # A model's and a (pydantic) dataclass's word for a field the schema does not have.
        if error.get("type") in ("extra_forbidden", "unexpected_keyword_argument"):
            message = "unknown field"
        problems.append(f"field '{location}': {message}" if location else message)
    return "; ".join(problems)


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
