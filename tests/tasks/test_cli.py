import re
import shutil

import yaml

from tasks import BUILTIN_DIR
from tasks.__main__ import main
from tests.conftest import needs_bwrap


def test_list_shows_every_builtin_task(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "parsing-querystring-plus" in out and "tasks in" in out


@needs_bwrap
def test_validate_accepts_a_good_task_and_rejects_a_broken_one(tmp_path, capsys):
    good = BUILTIN_DIR / "parsing-querystring-plus"
    assert main(["validate", str(good)]) == 0
    ok_line = capsys.readouterr().out.splitlines()[0]
    assert re.fullmatch(
        r"ok    parsing-querystring-plus: gold patch resolves it \(3 FAIL_TO_PASS and 9 PASS_TO_PASS pass\); "
        r"empty patch does not \(3 FAIL_TO_PASS fail\); \d+\.\d s",
        ok_line,
    ), ok_line

    # The same task with its FAIL_TO_PASS pointing at a test that passes without a fix.
    broken = tmp_path / "broken"
    shutil.copytree(good, broken)
    data = yaml.safe_load((broken / "task.yaml").read_text())
    data["id"] = "broken-task"
    data["grading"]["fail_to_pass"] = [data["grading"]["pass_to_pass"][0]]
    (broken / "task.yaml").write_text(yaml.safe_dump(data))
    assert main(["validate", str(broken)]) == 1
    assert "FAIL_TO_PASS tests pass without a fix" in capsys.readouterr().out


def test_schema_errors_name_the_file_and_field(tmp_path, capsys):
    (tmp_path / "repo").mkdir()
    (tmp_path / "task.yaml").write_text("id: x\nworkspace: repo\nproblem_statement: p\ngrading: {test_command: t}\n")
    assert main(["validate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "task.yaml") in err and "'grading.fail_to_pass'" in err
