"""`agent_env.validate`: the verdict per task, as data (the grading itself is exercised through
`python -m agent_env validate` in tests/tasks/test_cli.py)."""

import shutil
from pathlib import Path

from agent_env.validate import TaskValidation, _not_applied, judge, validate_task, validate_tasks
from tasks import BUILTIN_DIR, Task, builtin_tasks, load_task
from tasks.spec import GradingSpec
from tests.conftest import needs_bwrap

GRADING = GradingSpec(test_command="python -m unittest", fail_to_pass=["tests.test_x.T.test_x"])


def test_a_task_without_a_gold_patch_fails_naming_the_field():
    result = validate_task(Task(id="no-gold", problem_statement="p", grading=GRADING, source="t/task.yaml"))
    assert result.status == "failed" and not result.ok
    assert result.problems == ("t/task.yaml: field 'gold_patch': needed to prove the task can be solved",)


def test_a_task_that_cannot_run_here_is_unavailable_not_failed():
    tasks = [Task(id="far", problem_statement="p", grading=GRADING, unavailable="no clone of x/y")]
    assert list(validate_tasks(tasks)) == [
        TaskValidation("far", "unavailable", reason="not runnable here: no clone of x/y")
    ]


# -- real grading (local sandboxes) of a built-in task and broken copies of it ---------------

GOOD = BUILTIN_DIR / "parsing-querystring-plus"
F2P_KEY = "tests.test_plus_sign.PlusSignTests.test_encoded_plus_in_key"
P2P_UTF8 = "tests.test_query.ParseTests.test_utf8_escapes"


def _copy(tmp_path: Path, name: str, edit=lambda text: text, gold=lambda text: text) -> Task:
    """The built-in task under a new id, its task.yaml and gold patch edited."""
    folder = tmp_path / name
    shutil.copytree(GOOD, folder)
    definition = folder / "task.yaml"
    definition.write_text(edit(definition.read_text().replace("id: parsing-querystring-plus", f"id: {name}")))
    (folder / "gold.patch").write_text(gold((folder / "gold.patch").read_text()))
    return load_task(definition)


@needs_bwrap
def test_ok_says_what_was_checked_and_how_long_it_took():
    (task,) = builtin_tasks(["parsing-querystring-plus"])
    result = validate_task(task)
    assert (result.status, result.problems) == ("ok", ())
    assert result.checked == (
        "gold patch resolves it (3 FAIL_TO_PASS and 9 PASS_TO_PASS pass); empty patch does not (3 FAIL_TO_PASS fail)"
    )
    assert 0 < result.seconds < task.limits.grading_timeout_s * 2


@needs_bwrap
def test_a_gold_patch_that_does_not_apply_names_the_file_and_gits_reason(tmp_path):
    stale = "-    decoded = percent_decode(text, encoding=encoding)"
    task = _copy(tmp_path, "stale-gold", gold=lambda text: text.replace(stale, stale.replace("(text", "(txt")))
    result = validate_task(task)
    assert result.status == "failed"
    assert result.problems == (
        "gold patch does not apply to qsparse/decode.py (git apply: patch failed: qsparse/decode.py:46)",
    )


@needs_bwrap
def test_a_misspelled_test_id_is_reported_as_not_found_not_blamed_on_the_gold_patch(tmp_path):
    def misspell(text: str) -> str:
        text = text.replace(F2P_KEY, F2P_KEY.replace("PlusSignTests", "PlusSignTest"))
        return text.replace(P2P_UTF8, P2P_UTF8.removesuffix("s"))

    result = validate_task(_copy(tmp_path, "typo-ids", edit=misspell))
    assert result.status == "failed"
    assert result.problems == (
        "FAIL_TO_PASS: test id tests.test_plus_sign.PlusSignTest.test_encoded_plus_in_key not found in the test "
        f"output (did you mean {F2P_KEY}?)",
        f"PASS_TO_PASS: test id tests.test_query.ParseTests.test_utf8_escape not found in the test output "
        f"(did you mean {P2P_UTF8}?)",
    )
    # An id like no reported one: the test command may not run it.
    result = validate_task(_copy(tmp_path, "far-id", edit=lambda t: t.replace(P2P_UTF8, "elsewhere.Zzz.test_q")))
    assert result.problems == (
        "PASS_TO_PASS: test id elsewhere.Zzz.test_q not found in the test output (none of the 20 ids it reports "
        "is close: does grading.test_command run it?)",
    )


def test_gits_refusals_become_one_line_with_the_files():
    patch = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\ndiff --git a/c.py b/c.py\n--- a/c.py\n+++ b/c.py\n"
    log = "error: patch failed: a.py:1\nerror: a.py: patch does not apply\nerror: c.py: No such file or directory\n"
    assert _not_applied(log, patch) == (
        "gold patch does not apply to a.py, c.py (git apply: patch failed: a.py:1; c.py: No such file or directory)"
    )
    assert _not_applied("error: corrupt patch at line 7\n", patch) == (
        "gold patch does not apply (git apply: corrupt patch at line 7)"
    )


# -- the verdict from two grades (no sandbox): `judge` ----------------------------------------

from agent_env.grading import GradeResult, failure_cause  # noqa: E402
from tests.agent_env.test_network_failure import GET, NAME_RESOLUTION, PROXY, pytest_log  # noqa: E402

ROW_GRADING = GradingSpec(test_command="pytest -rA", log_parser="swebench", fail_to_pass=["t.py::a", "t.py::b"],
                          pass_to_pass=["t.py::c"])  # fmt: skip
ROW = Task(id="org__repo-1", problem_statement="p", grading=ROW_GRADING, repo="org/repo", gold_patch="x")
AUTHORED = Task(id="authored", problem_statement="p", grading=ROW_GRADING, gold_patch="x")


def _grade(statuses: dict[str, str], log: str = "", required=("t.py::a", "t.py::b", "t.py::c")) -> GradeResult:
    failed = tuple(t for t in required if statuses.get(t) != "PASSED")
    missing = tuple(t for t in required if t not in statuses)
    return GradeResult(not failed, True, statuses, failed, missing, log)


GOLD = _grade({"t.py::a": "PASSED", "t.py::b": "PASSED", "t.py::c": "PASSED"})
# One FAIL_TO_PASS test already passes before the fix (django__django-16429's shape).
EMPTY_ONE_PASSES = _grade({"t.py::a": "FAILED", "t.py::b": "PASSED", "t.py::c": "PASSED"})


def test_a_dataset_row_follows_the_datasets_rule_and_warns_of_a_fail_to_pass_test_passing_before():
    result = judge(ROW, GOLD, EMPTY_ONE_PASSES, seconds=2.0)
    assert (result.status, result.problems) == ("ok", ())
    assert result.warnings == (
        "FAIL_TO_PASS test t.py::b passes without the fix (valid by the dataset's rule: the gold patch resolves "
        "the row and the empty patch does not)",
    )
    assert result.checked == (
        "gold patch resolves it (2 FAIL_TO_PASS and 1 PASS_TO_PASS pass); empty patch does not (1 of 2 "
        "FAIL_TO_PASS fail)"
    )


def test_an_authored_task_keeps_the_strict_rule():
    result = judge(AUTHORED, GOLD, EMPTY_ONE_PASSES, seconds=2.0)
    assert result.status == "failed" and result.warnings == ()
    assert result.problems == ("FAIL_TO_PASS tests pass without a fix: ['t.py::b']",)


def test_a_row_is_network_dependent_only_when_a_required_test_failed_on_the_network():
    requests = GradingSpec(test_command="pytest -rA", log_parser="swebench", fail_to_pass=[GET], pass_to_pass=[PROXY])
    task = Task(id="psf__requests-1", problem_statement="p", grading=requests, repo="psf/requests", gold_patch="x")
    log = pytest_log(get_fails_with=NAME_RESOLUTION, body_fails=False)
    gold = _grade({GET: "FAILED", PROXY: "PASSED"}, log, required=(GET, PROXY))
    empty = _grade({GET: "FAILED", PROXY: "PASSED"}, log, required=(GET, PROXY))
    result = judge(task, gold, empty, seconds=1.0)
    assert result.status == "unavailable"
    assert result.reason == (
        f"not gradable offline: a required test needs the network ({GET}: " + f"E       {NAME_RESOLUTION}"[:300] + ")"
    )
    # The same log, where the failing required test failed on an assertion: a broken row,
    # whatever the passing test_proxy_env logged about the network.
    log = pytest_log(get_fails_with="AssertionError: 404 != 200", body_fails=False)
    gold = _grade({GET: "FAILED", PROXY: "PASSED"}, log, required=(GET, PROXY))
    result = judge(task, gold, empty, seconds=1.0)
    assert result.status == "failed"
    assert result.failed_tests == ((GET, "FAILED"),) and result.missing_tests == ()


CDMS = "xarray/tests/test_dataarray.py::TestDataArray::test_to_and_from_cdms2_classic"
QUANTILE = "xarray/tests/test_dataarray.py::TestDataArray::test_quantile"
OTHER_FILE = "xarray/tests/test_dataset.py::test_integrate"


def xarray_log(*, skipped_in: str = "xarray/tests/test_dataarray.py") -> str:
    """The tail of pydata__xarray-3305's gold run here (`pytest -rA`): the cdms2 tests are
    collected and skipped (`pytest.importorskip`), so no line names their ids."""
    return "\n".join(
        [
            f"PASSED {QUANTILE}",
            f"SKIPPED [1] {skipped_in}:3585: could not import 'cdms2': No module named 'cdms2'",
            "\x1b[33mSKIPPED [1] xarray/tests/test_backends.py:10: could not import 'Nio': No module named 'Nio'\x1b[0m",
            "=========== 1 passed, 2 skipped in 6.53s ============",
        ]
    )


def test_a_row_is_unavailable_when_a_required_test_is_skipped_for_a_module_the_environment_lacks():
    xarray = GradingSpec(test_command="pytest -rA", log_parser="swebench", fail_to_pass=[QUANTILE], pass_to_pass=[CDMS])
    task = Task(id="pydata__xarray-3305", problem_statement="p", grading=xarray, repo="pydata/xarray", gold_patch="x")
    required = (QUANTILE, CDMS)
    gold = _grade({QUANTILE: "PASSED"}, xarray_log(), required=required)
    empty = _grade({QUANTILE: "FAILED"}, xarray_log(), required=required)
    result = judge(task, gold, empty, seconds=1.0)
    assert (result.status, result.reason) == (
        "unavailable",
        f"not gradable here: a required test is skipped for a module this environment lacks ({CDMS}: "
        "could not import 'cdms2')",
    )
    # A skip in another test file says nothing of a missing id: the row's list is wrong.
    other = GradingSpec(
        test_command="pytest -rA", log_parser="swebench", fail_to_pass=[QUANTILE], pass_to_pass=[OTHER_FILE]
    )
    moved = Task(id="pydata__xarray-3305", problem_statement="p", grading=other, repo="pydata/xarray", gold_patch="x")
    required = (QUANTILE, OTHER_FILE)
    gold = _grade({QUANTILE: "PASSED"}, xarray_log(), required=required)
    empty = _grade({QUANTILE: "FAILED"}, xarray_log(), required=required)
    assert judge(moved, gold, empty, seconds=1.0).status == "failed"
    # Nor does one when the gold run failed a required test it did report.
    gold = _grade({QUANTILE: "FAILED"}, xarray_log(), required=(QUANTILE, CDMS))
    result = judge(task, gold, empty, seconds=1.0)
    assert result.status == "failed" and result.failed_tests == ((QUANTILE, "FAILED"),)


def test_a_failing_row_lists_failed_and_missing_tests_apart():
    gold = _grade({"t.py::a": "PASSED", "t.py::b": "ERROR"})  # t.py::c is not in the log
    result = judge(ROW, gold, EMPTY_ONE_PASSES, seconds=1.0)
    assert result.status == "failed"
    assert result.failed_tests == (("t.py::b", "ERROR"),) and result.missing_tests == ("t.py::c",)
    assert result.problems == ("gold patch does not resolve it (failing: t.py::b; missing: t.py::c)",)


def test_a_failing_row_says_first_what_its_first_failing_test_failed_with():
    """The cause in one line, before the lists (astropy__astropy-13033's shape: a leap-second
    table that expired since the harness ran, which its conftest makes an error)."""
    log = (
        "=================================== FAILURES ===================================\n"
        "___________________________________ test_b ___________________________________\n"
        ">       tsf = ts.fold(period=3.2 * u.s)\n"
        "E       astropy.utils.iers.iers.IERSStaleWarning: leap-second file is expired.\n"
        "E       during handling, another exception\n"
        "=========================== short test summary info ============================\n"
        "FAILED t.py::b - astropy.utils.iers.iers.IERSStaleWarning: leap-second file is expired.\n"
    )
    gold = _grade({"t.py::a": "PASSED", "t.py::b": "FAILED", "t.py::c": "PASSED"}, log)
    result = judge(ROW, gold, EMPTY_ONE_PASSES, seconds=1.0)
    assert result.problems == (
        "gold patch does not resolve it: t.py::b fails with `astropy.utils.iers.iers.IERSStaleWarning: leap-second "
        "file is expired.` (failing: t.py::b)",
    )
    # Django's and unittest's reports: the traceback's last exception line.
    django = (
        "======================================================================\n"
        "FAIL: test_b (t.Tests)\n"
        "----------------------------------------------------------------------\n"
        "Traceback (most recent call last):\n"
        '  File "t.py", line 3, in test_b\n'
        "    self.assertEqual(1, 2)\n"
        "AssertionError: 1 != 2\n"
    )
    assert failure_cause(django, "test_b (t.Tests)") == "AssertionError: 1 != 2"
    assert failure_cause(django, "test_other (t.Tests)") is None


def test_a_runner_that_reports_no_test_is_one_cause_not_a_list_of_missing_ids():
    crash = "=== gold patch ===\nImportError while loading conftest '/work/conftest.py'.\nE   ModuleNotFoundError: No module named 'py'\n"
    gold, empty = _grade({}, crash), _grade({}, crash)
    result = judge(ROW, gold, empty, seconds=1.0)
    assert result.status == "failed"
    assert result.problems[0] == (
        "the test command reported no test at all, so none of the 3 required tests can be found (the runner "
        "crashed or collected nothing; its last line: E   ModuleNotFoundError: No module named 'py')"
    )


def test_a_task_whose_workspace_vanished_is_unavailable_with_why_not_a_crash(tmp_path):
    """Runs that share a cache prune each other's finished workspaces; one deleted after a
    task was loaded made a validation of all matplotlib rows end in a FileNotFoundError
    traceback (2026-12-06). Now that task alone is n/a, saying what to do."""
    from agent_env import prepare_environment

    workspace = tmp_path / "ws"
    workspace.mkdir()
    task = Task(
        id="org__repo-2", problem_statement="p", grading=ROW_GRADING, repo="org/repo", gold_patch="x",
        workspace=workspace, sandbox={"python": {"version": "3.11"}},
    )  # fmt: skip
    workspace.rmdir()
    prepared = prepare_environment(task, "local")
    assert prepared.unavailable == (
        f"environment cannot be built here: its workspace {workspace} is gone (deleted after the task was loaded: "
        "another run with --prune sharing the cache?); run the same command again, which makes it anew"
    )
