"""Running exactly the required tests with the stock runner, as pure functions on command lines.

The grader decides a verdict from the exit status of a process that runs only the tests the
task requires (`agent_env.grading`), so a task's test command, which names whole test files
or modules, is turned into one that names test ids. Four runners cover every built-in task
and every SWE-bench Verified row:

| runner   | recognised by                            | a test id on its command line |
|----------|------------------------------------------|-------------------------------|
| unittest | `python -m unittest ...`                 | `pkg.mod.Class.test`          |
| pytest   | `pytest ...`, `python -m pytest ...`, `tox ... -- ...` | the node id `path::Class::test[param]` |
| django   | `.../runtests.py ...`                    | `app.mod.Class.test` (from `test (app.mod.Class)`) |
| sympy    | `bin/test ...`                           | its files, then `-k name ...` |

A token of the test command is a *directive* (a test file, directory or module it runs) when
it names a path of the workspace, directly or as a dotted module; directives are replaced by
the ids, every option is kept where it was. Nothing here runs anything.
"""

from __future__ import annotations

import re
import shlex

RUNNERS = ("unittest", "pytest", "django", "sympy")


def runner_of(command: str) -> str | None:
    """Which runner a test command uses, or None for one the grader cannot run test by test."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    if any(sign in command for sign in ("&&", "||", ";", "|", "\n", "`", "$(")):
        return None
    words = [t.rsplit("/", 1)[-1] for t in tokens]
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words) and words[i + 1] in ("unittest", "pytest"):
            return words[i + 1]
        if word in ("pytest", "py.test"):
            return "pytest"
        if word == "tox" and "--" in tokens:
            return "pytest"
        if word == "runtests.py":
            return "django"
        if tokens[i].endswith("bin/test"):
            return "sympy"
    return None


def _runner_end(tokens: list[str], runner: str) -> int:
    """The index after the token that starts the runner (after `--` for tox): only later
    tokens can be directives."""
    for i, token in enumerate(tokens):
        word = token.rsplit("/", 1)[-1]
        if token == "--" or (runner == "pytest" and word in ("pytest", "py.test") and "--" not in tokens):
            return i + 1
        if runner in ("unittest", "pytest") and token == "-m" and i + 1 < len(tokens) and tokens[i + 1] == runner:
            return i + 2
        if (runner == "django" and word == "runtests.py") or (runner == "sympy" and token.endswith("bin/test")):
            return i + 1
    return len(tokens)


def _is_directive(token: str, files: frozenset[str], dirs: frozenset[str], runner: str) -> bool:
    if token.startswith("-") or "=" in token:
        return False
    path = token.split("::", 1)[0].rstrip("/")
    if path in files or path in dirs:
        return True
    if runner in ("unittest", "django") and re.fullmatch(r"[A-Za-z_][\w.]*", token):
        module = token.replace(".", "/")
        for base in ("", "tests/"):
            if f"{base}{module}.py" in files or f"{base}{module}" in dirs:
                return True
            # `pkg.mod.Class`: a module prefix that is a file
            parts = module.split("/")
            if any(f"{base}{'/'.join(parts[:cut])}.py" in files for cut in range(1, len(parts))):
                return True
    return False


def directories(files: frozenset[str]) -> frozenset[str]:
    """Every directory that holds one of `files`."""
    out: set[str] = set()
    for path in files:
        parts = path.split("/")[:-1]
        for cut in range(1, len(parts) + 1):
            out.add("/".join(parts[:cut]))
    return frozenset(out)


def directives_of(command: str, files: frozenset[str]) -> tuple[str, ...]:
    """The test files, directories or modules `command` names."""
    runner = runner_of(command)
    if runner is None:
        return ()
    dirs = directories(files)
    tokens = shlex.split(command)
    start = _runner_end(tokens, runner)
    return tuple(t for t in tokens[start:] if _is_directive(t, files, dirs, runner))


def _django_label(test: str) -> str:
    match = re.match(r"^(\w+) \(([\w.]+)\)", test)
    return f"{match[2]}.{match[1]}" if match else test


def pytest_selector(test: str) -> str:
    """A node id pytest can select. Where the parameters cannot be selected, the function
    is, with all its parameters: an id that a log parser cut at a space (`test_x[a` of
    `test_x[a b]`), one whose parameters hold `::` (`test_x[a:::c]`: pytest < 7 splits
    its argument there), or one whose parameters are a path, which SWE-bench's parser
    shortens to its last part (`test_stdin[/mymodule.py]` stands for `[/tmp/.../mymodule.py]`)."""
    function, bracket, params = test.partition("[")
    shortened_path = params.startswith("/") and not params.startswith("//") and "*" not in params
    if bracket and (not test.endswith("]") or "::" in params or shortened_path):
        return function
    return test


def select_command(command: str, tests: list[str] | tuple[str, ...], files: frozenset[str]) -> str | None:
    """`command` running exactly `tests` (their ids, quoted), or None when its runner is not
    one of `RUNNERS`."""
    runner = runner_of(command)
    if runner is None:
        return None
    dirs = directories(files)
    tokens = shlex.split(command)
    # `VAR=value cmd ...` prefixes (sympy's PYTHONWARNINGS) stay as they are.
    start = _runner_end(tokens, runner)
    kept = tokens[:start] + [t for t in tokens[start:] if not _is_directive(t, files, dirs, runner)]
    if runner == "sympy":
        kept = tokens + ["-k", *dict.fromkeys(tests)]
    elif runner == "django":
        kept += list(dict.fromkeys(_django_label(t) for t in tests))
    elif runner == "pytest":
        # An id whose file is not in the workspace is no node id (a Verified row lists
        # `[100%]`, a parser's misreading): as an argument, pytest would stop at it.
        known = files | dirs
        selectors = [s for s in map(pytest_selector, tests) if s.split("::")[0] in known]
        if not selectors:
            return " ".join(_quote(t) for t in tokens)
        kept += list(dict.fromkeys(selectors))
    else:
        kept += list(dict.fromkeys(tests))
    return " ".join(_quote(t) for t in kept)


def _quote(token: str) -> str:
    # `VAR='a,b' cmd`: an assignment keeps its name unquoted so that the shell still reads it
    # as one.
    match = re.fullmatch(r"([A-Za-z_]\w*)=(.*)", token, re.S)
    if match:
        return f"{match[1]}={shlex.quote(match[2])}"
    return shlex.quote(token)
