"""Whether a run needs the network is decided by the required tests' own failures.

`network_failure` names a required test whose failure report shows a network error; a
network error anywhere else in the log (a test that passed and logged a retry, a failing
test nobody requires) says nothing about the row. The logs are shaped as real runs print
them: `pytest -rA` (requests) and django's `runtests.py --verbosity 2`.
"""

from __future__ import annotations

from agent_env.grading import failure_reports, network_failure
from tasks.log_parsers import log_parser

NAME_RESOLUTION = (
    "requests.exceptions.ConnectionError: HTTPConnectionPool(host='httpbin.org', port=80): Max retries exceeded "
    "with url: /get (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f3c>: Failed "
    "to establish a new connection: [Errno -3] Temporary failure in name resolution'))"
)
GET = "test_requests.py::RequestsTestCase::test_HTTP_200_OK_GET"
PROXY = "test_requests.py::RequestsTestCase::test_proxy_env"
BODY = "test_requests.py::RequestsTestCase::test_body_length"


def pytest_log(*, get_fails_with: str, body_fails: bool) -> str:
    """requests' `pytest -rA` run: test_HTTP_200_OK_GET fails with `get_fails_with`,
    test_proxy_env passes after logging a refused connection, test_body_length fails with an
    assertion when `body_fails`."""
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.9.19, pytest-7.4.0, pluggy-1.3.0",
        "rootdir: /testbed",
        "collected 3 items",
        "",
        f"test_requests.py F.{'F' if body_fails else '.'}                                                     [100%]",
        "",
        "=================================== FAILURES ===================================",
        "___________________ RequestsTestCase.test_HTTP_200_OK_GET ____________________",
        "",
        "self = <test_requests.RequestsTestCase testMethod=test_HTTP_200_OK_GET>",
        "",
        "    def test_HTTP_200_OK_GET(self):",
        ">       r = requests.get(httpbin('get'))",
        "",
        "test_requests.py:72: ",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ ",
        f"E       {get_fails_with}",
        "",
        "requests/adapters.py:516: ConnectionError",
    ]
    if body_fails:
        lines += [
            "____________________ RequestsTestCase.test_body_length _____________________",
            "",
            "    def test_body_length(self):",
            '>       self.assertEqual(prepare_headers("POST", "abc")["Content-Length"], "3")',
            "E       AssertionError: '0' != '3'",
            "",
            "test_requests.py:80: AssertionError",
        ]
    lines += [
        "==================================== PASSES ====================================",
        "_______________________ RequestsTestCase.test_proxy_env ________________________",
        "------------------------------ Captured log call -------------------------------",
        "WARNING  urllib3.connectionpool:connectionpool.py:812 Retrying (Retry(total=0)) after connection broken by "
        "'NewConnectionError(\"Failed to establish a new connection: [Errno 101] Network is unreachable\")': /",
        "=========================== short test summary info ============================",
        f"PASSED {PROXY}",
        f"PASSED {BODY}" if not body_fails else f"FAILED {BODY} - AssertionError: '0' != '3'",
        f"FAILED {GET} - {get_fails_with}",
        f"==================== {1 + body_fails} failed, {2 - body_fails} passed in 0.42s ====================",
    ]
    return "\n".join(lines) + "\n"


def _pytest_statuses(log: str) -> dict[str, str]:
    return log_parser("swebench", "psf/requests")(log)


def test_a_required_pytest_test_that_failed_reaching_for_the_network_is_named():
    log = pytest_log(get_fails_with=NAME_RESOLUTION, body_fails=False)
    found = network_failure(log, _pytest_statuses(log), [GET, PROXY])
    assert found == f"{GET}: " + f"E       {NAME_RESOLUTION}"[:300]


def test_network_errors_of_passed_or_unrequired_pytest_tests_are_ignored():
    log = pytest_log(get_fails_with=NAME_RESOLUTION, body_fails=True)
    statuses = _pytest_statuses(log)
    # The failing required test failed on an assertion; test_proxy_env passed (its log has a
    # network error); test_HTTP_200_OK_GET needs the network but is not required.
    assert network_failure(log, statuses, [BODY, PROXY]) is None
    assert network_failure(log, statuses, [PROXY]) is None
    # Its report is found (the short summary line and the block), the passing one's is not.
    assert [header for header, _ in failure_reports(log)] == [
        "RequestsTestCase.test_HTTP_200_OK_GET",
        "RequestsTestCase.test_body_length",
    ]


def test_a_required_test_failing_on_an_assertion_is_not_blamed_on_the_network():
    log = pytest_log(get_fails_with="AssertionError: 404 != 200", body_fails=False)
    assert network_failure(log, _pytest_statuses(log), [GET, PROXY]) is None


SERVER_TEST = "test_broken_pipe_errors (servers.test_basehttp.WSGIServerTestCase)"
HEAD_TEST = "test_no_body_for_head (servers.test_basehttp.WSGIRequestHandlerTestCase)"
DOCUMENTED = "WSGIServer handles broken pipe errors."
SEP, DASH = "=" * 70, "-" * 70


def django_log(*, server_error: str) -> str:
    """django's runner (`--verbosity 2`): a documented server test that errors with
    `server_error`, a test that fails an assertion, one that passes."""
    return "\n".join([
        "Testing against Django installed in '/testbed/django'",
        "Importing application servers",
        "Skipping setup of unused database(s): default, other.",
        "System check identified no issues (0 silenced).",
        "test_broken_pipe_errors (servers.test_basehttp.WSGIServerTestCase)",
        f"{DOCUMENTED} ... ERROR",
        f"{HEAD_TEST} ... FAIL",
        "test_https (servers.test_basehttp.WSGIRequestHandlerTestCase) ... ok",
        "",
        SEP,
        f"ERROR: {SERVER_TEST}",
        DOCUMENTED,
        DASH,
        "Traceback (most recent call last):",
        '  File "/testbed/tests/servers/test_basehttp.py", line 139, in test_broken_pipe_errors',
        '    server = WSGIServer(("localhost", 0), WSGIRequestHandler)',
        '  File "/usr/lib/python3.11/socketserver.py", line 452, in __init__',
        "    self.server_bind()",
        server_error,
        "",
        SEP,
        f"FAIL: {HEAD_TEST}",
        DASH,
        "Traceback (most recent call last):",
        '  File "/testbed/tests/servers/test_basehttp.py", line 120, in test_no_body_for_head',
        "    self.assertEqual(response.content, b'')",
        "AssertionError: b'hello' != b''",
        "",
        DASH,
        "Ran 3 tests in 0.058s",
        "",
        "FAILED (failures=1, errors=1)",
    ]) + "\n"  # fmt: skip


def _django_statuses(log: str) -> dict[str, str]:
    return log_parser("swebench", "django/django")(log)


def test_a_required_django_test_that_errored_resolving_a_name_is_named():
    log = django_log(server_error="socket.gaierror: [Errno -3] Temporary failure in name resolution")
    statuses = _django_statuses(log)
    assert statuses[DOCUMENTED] == "ERROR" and statuses[HEAD_TEST] == "FAILED"
    assert network_failure(log, statuses, [DOCUMENTED]) == (
        f"{DOCUMENTED}: socket.gaierror: [Errno -3] Temporary failure in name resolution"
    )


def test_a_django_network_error_outside_the_required_tests_is_ignored():
    log = django_log(server_error="socket.gaierror: [Errno -3] Temporary failure in name resolution")
    assert network_failure(log, _django_statuses(log), [HEAD_TEST]) is None
    log = django_log(server_error="OSError: [Errno 98] Address already in use")
    assert network_failure(log, _django_statuses(log), [DOCUMENTED, HEAD_TEST]) is None
