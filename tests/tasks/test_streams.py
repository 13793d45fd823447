"""Task streams (`tasks.streams`): phases, variants, renamed workspaces, and one-line errors."""

from __future__ import annotations

import textwrap

import pytest

from tasks import TaskError
from tasks.streams import load_stream, renamer, stream_path


def test_the_builtin_stream_has_its_five_phases_in_order():
    stream = load_stream("online")
    assert [(p.name, p.first_step, p.steps) for p in stream.phases] == [
        ("text+collections", 0, 8),
        ("config+numeric", 8, 8),
        ("api-change", 16, 8),
        ("stricter-tests", 24, 8),
        ("text+collections", 32, 8),
    ]
    assert stream.phases[4].task_ids == stream.phases[0].task_ids
    assert [t.id for t in stream.tasks] == [
        "text-dedent-whitespace-lines",
        "collections-ringbuffer-negative-index",
        "config-env-prefix-strip",
        "numeric-histogram-upper-edge",
        "text-dedent-whitespace-lines.api2",
        "collections-ringbuffer-negative-index.api2",
        "numeric-histogram-upper-edge.strict",
    ]
    assert [stream.phase_at(b).name for b in (0, 7, 8, 16, 31, 32, 39, 40, 500)] == [
        "text+collections", "text+collections", "config+numeric", "api-change", "stricter-tests",
        "text+collections", "text+collections", "text+collections", "text+collections",
    ]  # fmt: skip
    assert stream.steps == 40


def test_renames_are_whole_words_applied_at_once():
    rename = renamer({"line": "row", "row": "line", "_size": "_count"})
    assert rename("for line in rows: row = line; lines; self._size; _size_x") == (
        "for row in rows: line = row; lines; self._count; _size_x"
    )
    assert rename("docfmt/line.py tests.test_line") == "docfmt/row.py tests.test_line"


def test_a_variant_renames_workspace_paths_contents_patches_and_test_ids():
    stream = load_stream("online")
    task = next(t for t in stream.tasks if t.id == "text-dedent-whitespace-lines.api2")
    files = sorted(p.relative_to(task.workspace).as_posix() for p in task.workspace.rglob("*.py"))
    assert "docfmt/layout.py" in files and "docfmt/blocks.py" not in files
    source = (task.workspace / "docfmt/layout.py").read_text()
    assert "if not row:" in source and "if not line:" not in source
    assert "diff --git a/docfmt/layout.py b/docfmt/layout.py" in task.gold_patch
    assert "+        if not row.strip():" in task.gold_patch
    assert task.family == "text" and task.source.endswith("online.yaml: variants[0]")


def test_the_strict_variant_keeps_the_workspace_and_adds_a_required_test():
    stream = load_stream("online")
    base = next(t for t in stream.tasks if t.id == "numeric-histogram-upper-edge")
    strict = next(t for t in stream.tasks if t.id == "numeric-histogram-upper-edge.strict")
    assert strict.workspace == base.workspace
    assert set(strict.grading.fail_to_pass) - set(base.grading.fail_to_pass) == {
        "tests.test_range_edges.RangeEdgeTests.test_nan_has_no_bin"
    }
    assert strict.grading.pass_to_pass == base.grading.pass_to_pass
    assert "bin_index(nan)" in strict.problem_statement


def test_stream_sources_are_named_with_a_prefix():
    assert stream_path("stream:online") == "online"
    assert stream_path("builtin") is None and stream_path(["stream:x"]) is None


def _write(tmp_path, text: str):
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("phases: []\n", "field 'phases': List should have at least 1 item"),
        ("phases:\n  - {name: a, steps: 2, tasks: [nope]}\n", "phases[0]: field 'tasks': unknown task 'nope'"),
        ("phases:\n  - {name: a, steps: 2}\n", "phases[0]: field 'tasks': missing, and no earlier phase is named 'a'"),
        (
            "phases:\n  - {name: a, steps: 2, tasks: [text-slugify-custom-separator]}\n"
            "  - {name: a, steps: 2, tasks: [text-wrap-hanging-indent]}\n",
            "phases[1]: field 'tasks': phase 'a' returns with other tasks",
        ),
        (
            "variants:\n  - {id: v, base: missing}\nphases:\n  - {name: a, steps: 1, tasks: [v]}\n",
            "variants[0]: field 'base': no task 'missing' in builtin",
        ),
        (
            "variants:\n  - {id: text-wrap-hanging-indent, base: text-wrap-hanging-indent}\n"
            "phases:\n  - {name: a, steps: 1, tasks: [text-wrap-hanging-indent]}\n",
            "variants[0]: field 'id': 'text-wrap-hanging-indent' is already a task id",
        ),
        (
            "variants:\n  - {id: v, base: text-wrap-hanging-indent, rename: {'a b': c}}\n"
            "phases:\n  - {name: a, steps: 1, tasks: [v]}\n",
            "'a b' is not an identifier",
        ),
        (
            "variants:\n  - {id: v, base: text-wrap-hanging-indent, gold_patch: none.patch}\n"
            "phases:\n  - {name: a, steps: 1, tasks: [v]}\n",
            "variants[0]: field 'gold_patch': file",
        ),
        ("phases:\n  - {name: a, steps: 0, tasks: [text-wrap-hanging-indent]}\n", "field 'phases.0.steps'"),
        ("phase: []\n", "field 'phase': unknown field"),
    ],
)
def test_a_broken_stream_is_one_line_naming_file_and_field(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(TaskError) as caught:
        load_stream(path)
    assert str(caught.value).startswith(path) and message in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_unknown_stream_lists_the_builtin_ones():
    with pytest.raises(TaskError, match=r"task stream nowhere: no such file.*built in: online"):
        load_stream("nowhere")


def test_tasks_list_and_validate_take_a_stream_once_per_task():
    from tasks import load_sources as _load

    assert [t.id for t in _load(["stream:online"])] == [t.id for t in load_stream("online").tasks]
    mixed = [t.id for t in _load(["builtin", "stream:online"])]
    assert len(mixed) == len(set(mixed)) == 33 and mixed[-1] == "numeric-histogram-upper-edge.strict"
    assert [t.id for t in _load(["stream:online"], instances=["text-dedent-whitespace-lines.api2"])] == [
        "text-dedent-whitespace-lines.api2"
    ]
