"""The grader never raises on what the agent can shape: property tests of every parser that
reads agent-influenced text (test logs, diffs, test files, configuration) with hypothesis.

Forged runner accounts, non-dict JSON, huge lines, invalid UTF-8 (decoded as the sandbox
decodes it: replaced), NUL bytes and ANSI escapes each go through the log parsers of every
SWE-bench repository and the built-in formats, the patch splitter and filter, the twin
builders, the command narrowing and the configuration judge. Each must return a value of
its type; an exception here is a grader crash a policy could trigger."""

from __future__ import annotations

import ast
import json
import random

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent_env.grading.canaries import expectation_twin, tail_twin
from agent_env.grading.expected import changed_literal, literal_replacement
from agent_env.grading.logs import MAX_LOG_LINE, failure_reports, failure_text, network_failure, parseable, with_cut_ids
from agent_env.grading.marks import mark_tests
from agent_env.grading.protected import ProtectionRule, config_change_allowed, filter_patch, split_patch
from agent_env.grading.selection import directives_of, locate, runner_of, select_command
from tasks.log_parsers import log_parser

REPOS = (
    "astropy/astropy", "django/django", "matplotlib/matplotlib", "mwaskom/seaborn", "pallets/flask", "psf/requests",
    "pydata/xarray", "pylint-dev/pylint", "pytest-dev/pytest", "scikit-learn/scikit-learn", "sphinx-doc/sphinx",
    "sympy/sympy",
)  # fmt: skip
FORGED_LINES = [
    "PASSED tests/test_x.py::test_a",
    "test_a (tests.test_x.T.test_a) ... ok",
    "Ran 3 tests in 0.001s",
    "OK",
    "FAILED (failures=1)",
    "============================== 3 passed in 0.02s ==============================",
    "@@agentic-rl-guard deadbeef [1, 2, 3]",
    '@@agentic-rl-guard deadbeef "tests"',
    '{"tests": null}',
    "[]",
    "test_issue_1 ok",
    "________________ test_a ________________",
    "FAIL: test_b (tests.test_x.T)",
    "\x1b[31mFAILED\x1b[0m t.py::x - boom",
    "Temporary failure in name resolution",
    "=" * 70,
    "-" * 70,
]
# What a sandbox hands the grader: its output decoded as UTF-8 with invalid bytes replaced.
raw_bytes = st.binary(max_size=2000).map(lambda b: b.decode("utf-8", "replace"))
forged = st.lists(st.one_of(st.sampled_from(FORGED_LINES), st.text(max_size=200), raw_bytes), max_size=40).map(
    "\n".join
)
logs = st.one_of(forged, raw_bytes, st.text(max_size=3000))
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# A long line as the grader's parsers see it (`parseable` cuts longer ones: some SWE-bench
# parsers are quadratic in a line's length).
HUGE = "PASSED " + "x" * MAX_LOG_LINE + "\n" + "\0" * 10_000 + "\nOK\n"


@SETTINGS
@given(log=logs, repo=st.sampled_from(REPOS))
@example(log=HUGE, repo="psf/requests")
@example(log=json.dumps([1, {"tests": [None]}]), repo="sympy/sympy")
def test_every_log_parser_returns_statuses_for_any_log(log, repo):
    for name, which in (("swebench", repo), ("unittest", ""), ("pytest", "")):
        statuses = log_parser(name, which)(log)
        assert isinstance(statuses, dict)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in statuses.items())


def test_the_parsers_read_a_long_line_only_up_to_the_bound_keeping_the_id_it_starts_with():
    # psf/requests' parser took 211 s on one 256 KB line (the sandbox's output bound)
    log = "PASSED tests/test_a.py::test_b[" + "x" * 256_000 + "]\nFAILED tests/test_a.py::test_c - boom\n"
    cut = parseable(log)
    assert [len(line) for line in cut.split("\n")] == [MAX_LOG_LINE, 37, 0]
    assert log_parser("swebench", "psf/requests")(cut) == {
        "tests/test_a.py::test_b[" + "x" * (MAX_LOG_LINE - 31): "PASSED",
        "tests/test_a.py::test_c": "FAILED",
    }
    assert parseable("short\nlines") == "short\nlines"


@SETTINGS
@given(log=logs, test=st.text(max_size=80))
@example(log=HUGE, test="x")
def test_failure_reports_and_network_checks_read_any_log(log, test):
    assert all(isinstance(h, str) and isinstance(b, str) for h, b in failure_reports(log))
    assert isinstance(failure_text(log, test), str)
    statuses = {test: "FAILED"}
    assert network_failure(log, statuses, [test]) is None or isinstance(network_failure(log, statuses, [test]), str)


diff_lines = st.sampled_from(
    [
        "diff --git a/pkg/core.py b/pkg/core.py",
        'diff --git "a/p\\303\\251.py" "b/p\\303\\251.py"',
        "diff --git a/tests/test_x.py b/src/ok.py",
        "--- a/pkg/core.py",
        "+++ b/pkg/core.py",
        "+++ /dev/null",
        "new file mode 100644",
        "new file mode 120000",
        "rename from tests/a.py",
        "rename to pkg/a.py",
        "@@ -1,3 +1,4 @@",
        "@@ -999999999999999999999 +1 @@",
        "+[tool:pytest]",
        "+addopts = -p evil",
        "-x",
        " context",
        "\\ No newline at end of file",
        "GIT binary patch",
    ]
)
patches = st.one_of(
    st.lists(st.one_of(diff_lines, st.text(max_size=100), raw_bytes), max_size=40).map("\n".join), raw_bytes
)


@SETTINGS
@given(patch=patches)
@example(
    patch="diff --git a/setup.cfg b/setup.cfg\n--- a/setup.cfg\n+++ b/setup.cfg\n@@ -1 +1 @@\n-[x]\n+[tool:pytest]\n"
)
def test_patches_split_and_filter_whatever_they_hold(patch):
    sections, preamble = split_patch(patch)
    assert isinstance(preamble, str) and all(isinstance(s.paths, tuple) for s in sections)
    filtered = filter_patch(patch, ProtectionRule(existing_top=frozenset({"pkg"})), lambda path: "[tool:pytest]\n")
    assert isinstance(filtered.patch, str) and all(isinstance(r, str) for _, r in filtered.dropped)


python_bits = st.sampled_from(
    [
        "class T:\n    def test_a(self):\n        assert f() == 1\n",
        "def test_a():\n    assert f() == 1\n",
        "async def test_a():\n    self.assertEqual(f(), [1,\n 2])\n",
        "def test_a(x=1, *a, k, **kw):\n    assert_equal(f(), 'é')\n",
        "@pytest.mark.parametrize('x', [1])\ndef test_a(x):\n    assert 1 == f(x)\n",
        "test_a = lambda: None\n",
        "def test_a(self):\n    assert self.texts\n    self.assertIn(1, x)\n",
        "def test_a():\n    for x in y:\n        if x:\n            assert x.attr, 'm'\n        else:\n            self.assertTrue(x)\n",
        "def test_a(:\n",
        "\0",
        "'''unterminated",
    ]
)
sources = st.lists(st.one_of(python_bits, st.text(max_size=80)), max_size=6).map("".join)


@SETTINGS
@given(source=sources, qualname=st.sampled_from(["test_a", "T.test_a", "T.U.test_a", "", ".", "x.y.z"]))
def test_twins_are_built_or_refused_with_a_reason_for_any_test_file(source, qualname):
    for build in (tail_twin, expectation_twin):
        twin = build(source, "t.py", "t", qualname, random.Random(0))
        assert (twin.source is None) == bool(twin.reason)
        if twin.source is not None:
            compile(twin.source, "t.py", "exec")  # a built twin is valid Python
    # Marked for every run, with another function beside it: each function is marked or
    # refused with a reason, and the text stays valid Python wherever it parsed before.
    marked = mark_tests(source, "t.py", [qualname, "test_b"], 0)
    assert set(marked.marks) | set(marked.reasons) == {qualname, "test_b"}
    assert all(marked.reasons.values()) and not set(marked.marks) & set(marked.reasons)
    if marked.marks:
        compile(marked.source, "t.py", "exec")


@SETTINGS
@given(command=st.text(max_size=200), tests=st.lists(st.text(max_size=60), max_size=5))
@example(command="python3 -m unittest 'unterminated", tests=["a"])
@example(command="pytest tests/test_x.py -k 'a or b'", tests=["tests/test_x.py::t[a b"])
def test_any_command_is_narrowed_or_left_alone(command, tests):
    files = frozenset({"tests/test_x.py", "tests/__init__.py"})
    runner = runner_of(command)
    assert runner in (None, "unittest", "pytest", "django", "sympy")
    assert isinstance(directives_of(command, files), tuple)
    narrowed = select_command(command, tests, files)
    assert (narrowed is None) == (runner is None)
    for test in tests:
        where = locate(test, runner or "", files, ("tests/test_x.py",))
        assert isinstance(where, str) or (isinstance(where, tuple) and len(where) == 2)


@SETTINGS
@given(original=st.text(max_size=300), new=st.text(max_size=300), name=st.sampled_from(["setup.cfg", "pyproject.toml"]))
@example(original="[metadata]\nname = x\n", new="[metadata]\nname = x\n[tool:pytest\n", name="setup.cfg")
def test_configuration_changes_are_judged_for_any_text(original, new, name):
    assert isinstance(config_change_allowed(name, original, new), bool)
    assert config_change_allowed(name, original, original)


literals = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.complex_numbers(allow_nan=False),
        st.text(max_size=20), st.binary(max_size=20),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)  # fmt: skip


@SETTINGS
@given(value=literals, seed=st.integers(0, 2**32))
@example(value=1e20, seed=0)
@example(value=float("inf"), seed=0)
def test_a_changed_expected_literal_is_of_the_same_type_and_never_equal(value, seed):
    changed = changed_literal(value, random.Random(seed))
    if value is None:
        assert changed is None
    elif changed is not None and changed != value:
        assert type(changed) is type(value)
    else:  # no other value of that type to expect (inf + k is inf): the twin falls back
        assert literal_replacement(ast.parse(repr(value), mode="eval").body, random.Random(seed)) is None


def test_an_id_an_older_parser_cut_at_a_space_reads_the_whole_ids_status():
    # astropy 13236 lists `test_non_mapping_init[ceci`; today's parser reports the whole id
    statuses = {"t.py::f[ceci n'est pas]": "PASSED", "t.py::g[a b]": "PASSED", "t.py::g[a c]": "FAILED"}
    wanted = ["t.py::f[ceci", "t.py::g[a", "t.py::h[x", "t.py::f[cec"]
    assert with_cut_ids(statuses, wanted) == {
        **statuses,
        "t.py::f[ceci": "PASSED",
        "t.py::g[a": "FAILED",  # one of the tests it stands for failed
    }  # `h[x`: nothing reported; `f[cec`: a prefix of a word is no cut id
