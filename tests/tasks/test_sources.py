"""`tasks.load_task_set` over several sources: ids picked across them, and one-line errors
for ids no source has, ids two sources share, and sources that cannot be read."""

import shutil
import sys
import types
from pathlib import Path

import pytest

from tasks import BUILTIN_DIR, TaskError, load_task_set
from trainer.resolve import load_config

ROOT = Path(__file__).parents[2]
ROWS = ROOT / "tests" / "fixtures" / "swebench_verified_sample.jsonl"
CONFIG_IDS = load_config(ROOT / "configs" / "train_swe.yaml").tasks.ids


def own_tasks(folder: Path, *names: str) -> Path:
    """A folder of tasks: copies of a built-in task under new ids."""
    for name in names:
        shutil.copytree(BUILTIN_DIR / "parsing-querystring-plus", folder / name)
        definition = folder / name / "task.yaml"
        definition.write_text(definition.read_text().replace("id: parsing-querystring-plus", f"id: {name}"))
    return folder


def test_builtin_and_own_tasks_load_together_and_ids_pick_across_them(tmp_path):
    mine = own_tasks(tmp_path / "my-tasks", "my-plus", "my-other")
    both = load_task_set(["builtin", str(mine)])
    assert len(both) == len(load_task_set("builtin")) + 2
    picked = load_task_set(["builtin", str(mine)], ["my-other", "text-dedent-whitespace-lines"])
    assert [t.id for t in picked] == ["my-other", "text-dedent-whitespace-lines"]
    assert picked[0].source == str(mine / "my-other" / "task.yaml")


def test_swebench_rows_mix_with_task_folders(tmp_path):
    picked = load_task_set([str(ROWS), "builtin"], ["sympy__sympy-11618", "config-env-prefix-strip"])
    assert [(t.id, t.grading.log_parser) for t in picked] == [
        ("sympy__sympy-11618", "swebench"),
        ("config-env-prefix-strip", "unittest"),
    ]


def test_the_config_files_builtin_ids_with_own_tasks_say_what_to_do(tmp_path, monkeypatch):
    """`make train-swe ARGS="tasks.source=my-tasks"`: the config file's four built-in ids still
    apply; the one-line error says to add builtin, pass tasks.ids=[] or list own ids."""
    monkeypatch.chdir(tmp_path)
    own_tasks(tmp_path / "my-tasks", "my-plus")
    config = load_config(ROOT / "configs" / "train_swe.yaml", ["tasks.source=my-tasks"])
    with pytest.raises(TaskError) as error:
        load_task_set(config.tasks.source, config.tasks.ids)
    assert str(error.value) == (
        f"task id(s) {', '.join(CONFIG_IDS)} not found in my-tasks; they are built-in tasks: add builtin to "
        "the sources (tasks.source=[builtin, my-tasks]), or pass tasks.ids=[] (evals: no --instances) to take "
        "every task, or list ids they have: my-plus"
    )
    # Each way out the message names works.
    assert len(load_task_set(["builtin", "my-tasks"], config.tasks.ids)) == 4
    config = load_config(ROOT / "configs" / "train_swe.yaml", ["tasks.source=my-tasks", "tasks.ids=[]"])
    assert [t.id for t in load_task_set(config.tasks.source, config.tasks.ids)] == ["my-plus"]
    config = load_config(ROOT / "configs" / "train_swe.yaml", ["tasks.source=[builtin, my-tasks]"])
    assert config.tasks.source == ["builtin", "my-tasks"]
    assert [t.id for t in load_task_set(config.tasks.source, config.tasks.ids)] == CONFIG_IDS


def test_an_unknown_id_names_the_sources_and_the_closest_ids(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    own_tasks(tmp_path / "my-tasks", "my-plus")
    with pytest.raises(TaskError) as error:
        load_task_set(["builtin", "my-tasks"], ["my-pluss", "text-dedent", "my-plus"])
    assert str(error.value) == (
        "task id(s) my-pluss, text-dedent not found in builtin, my-tasks "
        "(closest: my-plus for my-pluss, text-dedent-whitespace-lines for text-dedent); "
        "pass tasks.ids=[] (evals: no --instances) to take every task, or list ids they have (31 tasks)"
    )


def test_an_id_in_two_sources_names_both(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    own_tasks(tmp_path / "a", "same-id")
    own_tasks(tmp_path / "b", "same-id")
    with pytest.raises(TaskError) as error:
        load_task_set(["a", "b"])
    assert str(error.value) == (
        "task id 'same-id' is in two sources: a (a/same-id/task.yaml) and b (b/same-id/task.yaml); "
        "ids must be unique across the sources"
    )
    with pytest.raises(TaskError) as error:
        load_task_set(["a", "a"])
    assert str(error.value) == "task source a is given twice"
    with pytest.raises(TaskError) as error:
        load_task_set([])
    assert str(error.value) == "no task source given: builtin, a folder of task YAMLs, or SWE-bench rows (a .jsonl)"


@pytest.mark.parametrize(
    ("source", "hint"),
    [
        ("./my-taks", " (did you mean my-tasks?)"),
        ("my-tasks/my-pluss", " (did you mean my-tasks/my-plus?)"),
        ("rows.jsonl", ""),
        ("~/no-such-folder-here/rows.jsonl", ""),
        ("a/b/c", ""),
    ],
)
def test_a_path_that_does_not_exist_is_one_line_not_a_hub_lookup(tmp_path, monkeypatch, source, hint):
    monkeypatch.chdir(tmp_path)
    own_tasks(tmp_path / "my-tasks", "my-plus")
    monkeypatch.setitem(sys.modules, "datasets", None)  # any hub lookup would fail differently
    with pytest.raises(TaskError) as error:
        load_task_set(source)
    assert str(error.value) == (
        f"task source {source}: no such file or folder{hint}; give a folder of task YAMLs, a task.yaml, "
        "a SWE-bench .jsonl, builtin, or a Hugging Face dataset name"
    )


def _hub(error: Exception) -> types.ModuleType:
    module = types.ModuleType("datasets")

    def load_dataset(name, split):
        raise error

    module.load_dataset = load_dataset
    return module


def test_a_dataset_the_hub_cannot_give_is_one_line_suggesting_a_local_jsonl(monkeypatch):
    monkeypatch.setitem(
        sys.modules, "datasets", _hub(ConnectionError("Couldn't reach 'owner/rows' on the Hub\nmore detail"))
    )
    with pytest.raises(TaskError) as error:
        load_task_set("owner/rows")
    assert str(error.value) == (
        "dataset owner/rows: not a local path, and the Hugging Face hub could not give it "
        "(ConnectionError: Couldn't reach 'owner/rows' on the Hub); "
        "pass a local SWE-bench .jsonl instead (its rows, one per line)"
    )
    monkeypatch.setitem(sys.modules, "datasets", None)  # the `datasets` package not installed
    with pytest.raises(TaskError) as error:
        load_task_set("verified", ["django__django-10097"])
    assert str(error.value).startswith(
        "dataset princeton-nlp/SWE-bench_Verified: not a local path, and the Hugging Face hub could not give it "
        "(ModuleNotFoundError: "
    )
