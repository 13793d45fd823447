"""Task streams: SAO's online setting, where the tasks a model trains on change during a run.

A stream is a YAML file (`tasks/data/streams/online.yaml` is the built-in one) with phases, each
a number of learner steps and the tasks picked during them, and variants: tasks derived
from a source's tasks, so that the same task can change between phases.

    source: builtin
    variants:
      - id: collections-ringbuffer-negative-index.api2
        base: collections-ringbuffer-negative-index
        rename: {_size: _count, buffer: ring}   # the repository's API changes
      - id: numeric-histogram-upper-edge.strict
        base: numeric-histogram-upper-edge
        test_patch: online/histogram-strict.test.patch   # stricter hidden tests ...
        gold_patch: online/histogram-strict.gold.patch   # ... that the old fix fails
        fail_to_pass: [...]
    phases:
      - {name: text+collections, steps: 10, tasks: [text-dedent-whitespace-lines, ...]}
      - {name: api-change, steps: 10, tasks: [collections-ringbuffer-negative-index.api2]}
      - {name: text+collections, steps: 10}   # a phase that returns: its tasks again

`rename` maps whole identifiers (and path components) to new names in everything the task
has: its workspace (file contents and file paths), gold and test patches, problem
statement, test command and test ids. The variant is then the same bug in a repository
whose names changed: an edit learnt on the base task no longer applies. Its workspace is
written once under `$AGENTIC_RL_CACHE/workspaces/streams`, keyed by its content.

Past the last phase a stream stays in it. The trainer serves a stream through its task
picker (`tasks.source: stream:online` or `stream:PATH`); see `trainer.orchestrator.schedule`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError, field_validator

from sandboxes.yaml_files import field_problems, load_mapping
from tasks.sets import load_task_set
from tasks.spec import TASK_ID, Task, TaskError, _Strict, _tree_digest, workspace_cache_dir

STREAM_PREFIX = "stream:"
BUILTIN_STREAMS = Path(__file__).parent / "data" / "streams"


class VariantDefinition(_Strict):
    """A task derived from a source's task (`base`): renamed, or with other tests and fix."""

    id: str
    base: str
    """The id of the task it is made from (in the stream's `source`)."""
    family: str | None = None
    """Its family (default: the base task's)."""
    rename: dict[str, str] = Field(default_factory=dict)
    """Whole identifiers and path components to rename everywhere (old: new)."""
    problem_statement: str | None = None
    gold_patch: str | None = None
    """File (beside the stream YAML) with the variant's fix; default: the base's, renamed."""
    test_patch: str | None = None
    """File with the variant's hidden tests; default: the base's, renamed."""
    fail_to_pass: list[str] | None = None
    pass_to_pass: list[str] | None = None

    @field_validator("id")
    @classmethod
    def _id_is_a_name(cls, value: str) -> str:
        if not TASK_ID.match(value):
            raise ValueError(f"{value!r} is not a task id (letters, digits, '_', '.', '-')")
        return value

    @field_validator("rename")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for old, new in value.items():
            for name in (old, new):
                if not re.fullmatch(r"\w+", name):
                    raise ValueError(f"{name!r} is not an identifier (letters, digits, '_')")
        return value


class PhaseDefinition(_Strict):
    name: str = Field(min_length=1)
    steps: int = Field(gt=0)
    """Learner steps (batches) the phase lasts."""
    tasks: list[str] | None = None
    """Task ids picked in turn during the phase; omitted: those of the earlier phase of this name."""


class StreamDefinition(_Strict):
    source: str | list[str] = "builtin"
    """Where the base tasks come from (`builtin`, a folder of task YAMLs, ...)."""
    variants: list[VariantDefinition] = Field(default_factory=list)
    phases: list[PhaseDefinition] = Field(min_length=1)


@dataclass(frozen=True)
class Phase:
    name: str
    first_step: int
    """The 0-based index of the phase's first batch (learner step `first_step + 1`)."""
    steps: int
    task_ids: tuple[str, ...]


@dataclass(frozen=True)
class TaskStream:
    path: Path
    phases: tuple[Phase, ...]
    tasks: tuple[Task, ...]
    """Every task some phase picks, each once, in the order phases first name them."""

    def phase_at(self, batch: int) -> Phase:
        """The phase of 0-based batch `batch` (the last phase once the stream has run out)."""
        for phase in self.phases:
            if batch < phase.first_step + phase.steps:
                return phase
        return self.phases[-1]

    @property
    def steps(self) -> int:
        """Learner steps until the last phase ends."""
        last = self.phases[-1]
        return last.first_step + last.steps


def stream_path(source: object) -> str | None:
    """The stream named by a task source (`stream:NAME` or `stream:PATH`), or None."""
    if isinstance(source, str) and source.startswith(STREAM_PREFIX):
        return source[len(STREAM_PREFIX) :]
    return None


def resolve_stream(name: str) -> Path:
    """A stream's YAML: a path, or the name of a built-in stream (`online`)."""
    path = Path(name).expanduser()
    if path.is_file():
        return path
    builtin = BUILTIN_STREAMS / f"{name}.yaml"
    if "/" not in name and builtin.is_file():
        return builtin
    known = ", ".join(sorted(p.stem for p in BUILTIN_STREAMS.glob("*.yaml")))
    raise TaskError(f"task stream {name}: no such file, and no built-in stream of that name (built in: {known})")


def load_stream(name: str, repo_cache: str | Path | None = None) -> TaskStream:
    """Load a stream YAML and the tasks its phases pick (variants derived, workspaces written);
    errors name the file and the field."""
    path = resolve_stream(name)
    try:
        definition = StreamDefinition.model_validate(load_mapping(path, TaskError))
    except ValidationError as exc:
        raise TaskError(f"{path}: {field_problems(exc)}") from None
    bases = {t.id: t for t in load_task_set(definition.source, None, repo_cache=repo_cache)}
    variants: dict[str, Task] = {}
    for index, variant in enumerate(definition.variants):
        where = f"{path}: variants[{index}]"
        if variant.id in bases or variant.id in variants:
            raise TaskError(f"{where}: field 'id': {variant.id!r} is already a task id; give the variant a new one")
        if variant.base not in bases:
            raise TaskError(f"{where}: field 'base': no task {variant.base!r} in {definition.source}")
        variants[variant.id] = derive_variant(bases[variant.base], variant, path.parent, where)
    known = {**bases, **variants}
    phases: list[Phase] = []
    named: dict[str, tuple[str, ...]] = {}
    first_step = 0
    for index, phase in enumerate(definition.phases):
        where = f"{path}: phases[{index}]"
        if phase.tasks is None:
            if phase.name not in named:
                raise TaskError(f"{where}: field 'tasks': missing, and no earlier phase is named {phase.name!r}")
            task_ids = named[phase.name]
        else:
            if not phase.tasks:
                raise TaskError(f"{where}: field 'tasks': empty; list the task ids the phase picks")
            for task_id in phase.tasks:
                if task_id not in known:
                    raise TaskError(f"{where}: field 'tasks': unknown task {task_id!r} (not in {definition.source} "
                                    f"nor a variant)")  # fmt: skip
            task_ids = tuple(phase.tasks)
            if named.get(phase.name, task_ids) != task_ids:
                raise TaskError(f"{where}: field 'tasks': phase {phase.name!r} returns with other tasks; "
                                f"give it another name")  # fmt: skip
        named.setdefault(phase.name, task_ids)
        phases.append(Phase(phase.name, first_step, phase.steps, task_ids))
        first_step += phase.steps
    picked = list(dict.fromkeys(task_id for phase in phases for task_id in phase.task_ids))
    return TaskStream(path, tuple(phases), tuple(known[task_id] for task_id in picked))


# -- variants -------------------------------------------------------------------------------
def renamer(renames: dict[str, str]):
    """A function renaming whole identifiers in a text, all at once (so `a: b, b: a` swaps)."""
    if not renames:
        return lambda text: text
    pattern = re.compile(
        r"(?<!\w)(" + "|".join(re.escape(old) for old in sorted(renames, key=len, reverse=True)) + r")(?!\w)"
    )
    return lambda text: pattern.sub(lambda match: renames[match.group(1)], text)


def derive_variant(base: Task, variant: VariantDefinition, folder: Path, where: str) -> Task:
    """The variant task of `base` (see the module docstring)."""
    if base.workspace is None or base.unavailable:
        raise TaskError(f"{where}: field 'base': task {base.id} cannot run here ({base.unavailable or 'no workspace'})")
    if base.workspace_is_repo and variant.rename:
        raise TaskError(f"{where}: field 'rename': {base.id} is a git repository (a SWE-bench row); "
                        f"rename works on task folders")  # fmt: skip
    rename = renamer(variant.rename)

    def beside(field: str) -> str | None:
        name = getattr(variant, field)
        if name is None:
            return None
        file = folder / name
        if not file.is_file():
            raise TaskError(f"{where}: field '{field}': file {file} does not exist")
        return file.read_text()

    grading = base.grading
    grading = grading.model_copy(
        update={
            "test_command": rename(grading.test_command),
            "fail_to_pass": variant.fail_to_pass or [rename(t) for t in grading.fail_to_pass],
            "pass_to_pass": (
                variant.pass_to_pass if variant.pass_to_pass is not None else [rename(t) for t in grading.pass_to_pass]
            ),
        }
    )
    workspace = base.workspace if not variant.rename else renamed_workspace(base.workspace, variant.rename, variant.id)
    return dataclasses.replace(
        base,
        id=variant.id,
        family=variant.family or base.family,
        problem_statement=variant.problem_statement or rename(base.problem_statement),
        workspace=workspace,
        gold_patch=beside("gold_patch") or rename(base.gold_patch),
        test_patch=beside("test_patch") or rename(base.test_patch),
        grading=grading,
        source=where,
    )


def renamed_workspace(source: Path, renames: dict[str, str], variant_id: str) -> Path:
    """`source` with `renames` applied to every text file's content and to every path, written
    once under the workspace cache (keyed by content), atomically: concurrent runs agree."""
    key = hashlib.sha256((_tree_digest(source) + json.dumps(renames, sort_keys=True)).encode()).hexdigest()[:16]
    target = workspace_cache_dir() / "streams" / f"{variant_id}-{key}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    rename = renamer(renames)
    staging = Path(tempfile.mkdtemp(prefix=f".{variant_id}-", dir=target.parent))
    try:
        for file in sorted(p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            relative = file.relative_to(source).as_posix()
            out = staging / rename(relative)
            out.parent.mkdir(parents=True, exist_ok=True)
            data = file.read_bytes()
            try:
                out.write_text(rename(data.decode("utf-8")))
            except UnicodeDecodeError:  # a binary file: its bytes as they are
                out.write_bytes(data)
            shutil.copymode(file, out)
        try:
            os.rename(staging, target)
        except OSError:  # another process published it first: theirs is the same content
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
