"""Running exactly the required tests with the stock runner, as pure functions on command lines.

The grader decides a verdict from the exit status of a process that runs only the tests the
task requires (`agent_env.grading`), so a task's test command, which names whole test files
or modules, is turned into one that names test ids. Four runners cover every built-in task
and every SWE-bench Verified row:

| runner   | recognised by                            | a test id on its command line |
|----------|------------------------------------------|-------------------------------|
| unittest | `python -m unittest ...`                 | `pkg.mod.Class.test`          |
| pytest   | `pytest ...`, `python -m pytest ...`, `tox ... -- ...` | the node id `path::Class::test[param]` |
| django   | `.../runtests.py ...`                    | `app.mod.Class.test` (from `test (app.mod.Class)` or its description) |
| sympy    | `bin/test ...`                           | its files, then `-k name ...` (`sympy_exact_selection`) |

A token of the test command is a *directive* (a test file, directory or module it runs) when
it names a path of the workspace, directly or as a dotted module; directives are replaced by
the ids, every option is kept where it was. `locate` finds the file and the name in it that
a test id stands for (where the canary twins are built). Nothing here runs anything.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Mapping

from agent_env.grading import pysource

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


_DJANGO_NAMED = re.compile(r"^(\w+) \(([\w.]+)\)$")


def django_label(test: str, described: Mapping[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """The runtests.py labels of a Django test id, or () when it names none we can find.

    SWE-bench's Django ids take three forms: `test (app.mod.Class)`, `test
    (app.mod.Class.test)` (Python 3.11's unittest), and a test's description, the first
    line of its docstring, which the runner prints in place of its name (18% of
    Verified's Django ids). A description is looked up in `described`
    (`django_descriptions` of the modules the command runs)."""
    if match := _DJANGO_NAMED.match(test):
        name, dotted = match[1], match[2]
        return (dotted if dotted.endswith(f".{name}") else f"{dotted}.{name}",)
    return (described or {}).get(test, ())


def django_modules(command: str, files: frozenset[str]) -> dict[str, str]:
    """{dotted module: file} of every test module a runtests.py command runs: its module
    labels, and each module in the packages it names (`migrations` runs tests/migrations/)."""
    modules: dict[str, str] = {}
    for directive in directives_of(command, files):
        path = "tests/" + directive.replace(".", "/")
        for file in sorted(files):
            if file == f"{path}.py" or (file.startswith(f"{path}/") and file.endswith(".py")):
                modules[file[len("tests/") : -len(".py")].replace("/", ".")] = file
    return modules


def django_descriptions(sources: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """{description: labels} over `sources` ({dotted module: its source}): each test
    method with a docstring, by unittest's `shortDescription()` (the docstring's first
    line), as the label of the class that defines it and of each class in the same module
    that inherits it. A mixin gives no label of its own (`_is_test_case`): as a label, its
    method is a bare function that unittest calls without `self`, and runtests.py stops."""
    found: dict[str, list[str]] = {}
    for module, source in sources.items():
        try:
            tree = pysource.parse(source)
        except (SyntaxError, ValueError):
            continue
        classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
        for name, node in classes.items():
            for method, doc in _described_methods(node, classes, set()):
                if _is_test_case(node, classes, set()):
                    found.setdefault(doc, []).append(f"{module}.{name}.{method}")
    return {doc: tuple(dict.fromkeys(labels)) for doc, labels in found.items()}


def _is_test_case(node: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: set[str]) -> bool:
    """Whether a class can be a test case: one of its bases comes from outside the module
    (`SimpleTestCase`, `unittest.TestCase`, ...), or is a class of the module that can. A
    class of no base, of `object`, or only of mixins of its module (django's cache tests'
    `BaseMemcachedTests(BaseCacheTests)`) is a mixin."""
    seen.add(node.name)
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id == "object":
            continue
        parent = classes.get(base.id) if isinstance(base, ast.Name) else None
        if parent is None or (parent.name not in seen and _is_test_case(parent, classes, seen)):
            return True
    return False


def _described_methods(node: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: set[str]) -> list[tuple[str, str]]:
    """(method, description) of each test method `node` defines or inherits from a class
    of its own module, the nearest definition of a name winning."""
    seen.add(node.name)
    own: dict[str, str | None] = {}
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test"):
            doc = ast.get_docstring(item, clean=False)
            own[item.name] = doc.strip().split("\n")[0].strip() if doc and doc.strip() else None
    out = [(name, doc) for name, doc in own.items() if doc]
    for base in node.bases:
        parent = classes.get(base.id) if isinstance(base, ast.Name) else None
        if parent is not None and parent.name not in seen:
            out += [(name, doc) for name, doc in _described_methods(parent, classes, seen) if name not in own]
    return out


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


def pytest_definition_order(source: str) -> dict[str, tuple[int, ...]]:
    """{`test` or `Class::test` (nested: `A::B::test`): the lines of its enclosing classes
    and its own `def`} over a test file's source: the order pytest collects a module in (its
    definitions' order); {} for a file that does not parse."""
    try:
        tree = pysource.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, tuple[int, ...]] = {}

    def walk(body: list[ast.stmt], prefix: str, lines: tuple[int, ...]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name, at = f"{prefix}{node.name}", (*lines, node.lineno)
                found.setdefault(name, at)
                if isinstance(node, ast.ClassDef):
                    walk(node.body, f"{name}::", at)

    walk(tree.body, "", ())
    return found


def pytest_order(
    selectors: list[str], directives: tuple[str, ...], positions: Mapping[str, Mapping[str, tuple[int, ...]]]
) -> list[str]:
    """Node ids, once each, in the order the unmodified command collects them: by the
    directive that holds their file (the command's order), then file, then definition in
    the file (`positions`: `pytest_definition_order` of each file); ids not found keep the
    row's order after those that are. As `loader_order` for unittest: tests of one module
    share its state (sphinx's test app), so the narrowed run keeps the whole run's order."""
    given = list(dict.fromkeys(selectors))

    def place(index: int) -> tuple:
        path, _, rest = given[index].partition("::")
        held = next(
            (i for i, d in enumerate(directives) if path == d or path.startswith(f"{d.rstrip('/')}/")), len(directives)
        )
        at = positions.get(path, {}).get(rest.partition("[")[0]) if rest else (0,)
        return held, path, at if at is not None else (10**9,), index

    return [given[i] for i in sorted(range(len(given)), key=place)]


def select_command(
    command: str,
    tests: list[str] | tuple[str, ...],
    files: frozenset[str],
    described: Mapping[str, tuple[str, ...]] | None = None,
    positions: Mapping[str, Mapping[str, tuple[int, ...]]] | None = None,
) -> str | None:
    """`command` running exactly `tests` (their ids, quoted), or None when its runner is not
    one of `RUNNERS`. `described`: Django's test descriptions (`django_descriptions`); a
    Django id that names no test runs the command unnarrowed, as SWE-bench runs it.
    `positions`: each pytest test file's `pytest_definition_order`, so that the tests run in
    the order the whole files run them (without it, the row's order)."""
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
        labels = [django_label(t, described) for t in tests]
        if not all(labels):  # a test we cannot name: the command as the task wrote it
            return " ".join(_quote(t) for t in tokens)
        kept += loader_order([label for found in labels for label in found], directives_of(command, files))
    elif runner == "pytest":
        # An id whose file is not in the workspace is no node id (a Verified row lists
        # `[100%]`, a parser's misreading): as an argument, pytest would stop at it.
        known = files | dirs
        selectors = [s for s in map(pytest_selector, tests) if s.split("::")[0] in known]
        if not selectors:
            return " ".join(_quote(t) for t in tokens)
        kept += (
            pytest_order(selectors, directives_of(command, files), positions or {})
            if positions
            else list(dict.fromkeys(selectors))
        )
    else:
        kept += loader_order(tests, directives_of(command, files))
    return " ".join(_quote(t) for t in kept)


SYMPY_DESELECTED = "<->"
"""The name a non-required test takes in a narrowed sympy run: no keyword is part of it."""


def sympy_exact_selection(tests: list[str] | tuple[str, ...]) -> str:
    """Python appended to each test file a narrowed sympy run executes, so that it runs
    exactly `tests`. `bin/test -k name` runs every test whose name *contains* a keyword,
    ignoring case (`SymPyTests.matches` compares `__name__`): `-k test_diag` also runs
    `test_diagonalization`, and a test that fails in every run (sympy__sympy-13877's
    neighbours) fails the verdict of a fix. The block gives every other `test_*` function
    of the module a name no keyword is part of, once the module has defined them all; the
    runner still collects them by their module-level name, and `-k` then drops them. Which
    tests run is all it changes: the verdict is still the runner's exit status, and a
    required test that tested code deselects is caught by its canary twins."""
    names = ", ".join(repr(name) for name in sorted(dict.fromkeys(tests)))
    return (
        "\n\n# Added by the grader: `bin/test -k` matches parts of names; run exactly the required tests.\n"
        "def _grader_select(space, keep):\n"
        "    for name, test in list(space.items()):\n"
        "        if name.startswith('test_') and name not in keep and callable(test) and not isinstance(test, type):\n"
        "            try:\n"
        f"                test.__name__ = {SYMPY_DESELECTED!r}\n"
        "            except (AttributeError, TypeError):\n"
        "                pass\n"
        "\n\n"
        f"_grader_select(globals(), {{{names}}})\n"
        "del _grader_select\n"
    )


def loader_order(labels: list[str] | tuple[str, ...], directives: tuple[str, ...]) -> list[str]:
    """Dotted test labels (`app.mod.Class.test`), once each, in the order the unmodified
    command runs them: by the directive that holds them, in the command's order, then by
    module, class and method name, as unittest's loader sorts them (`dir()` of a module,
    `getTestCaseNames`). Tests that share a process share its state: a row's test can
    depend on what an earlier test of its module left (django__django-11532's deletes a
    cache that earlier ones fill), so the narrowed run keeps the order the whole run had.
    Django's runner then groups the suite by test case type, stably, in both runs."""
    dotted = [d.removesuffix(".py").replace("/", ".") for d in directives]

    def place(label: str) -> tuple[int, list[str]]:
        held = (
            i
            for i, d in enumerate(dotted)
            if label == d or label.startswith(f"{d}.") or f"tests.{label}".startswith(f"{d}.")
        )
        return next(held, len(dotted)), label.split(".")

    return sorted(dict.fromkeys(labels), key=place)


def _quote(token: str) -> str:
    # `VAR='a,b' cmd`: an assignment keeps its name unquoted so that the shell still reads it
    # as one.
    match = re.fullmatch(r"([A-Za-z_]\w*)=(.*)", token, re.S)
    if match:
        return f"{match[1]}={shlex.quote(match[2])}"
    return shlex.quote(token)


# -- where a test lives -----------------------------------------------------------------------


def locate(
    test: str,
    runner: str,
    files: frozenset[str],
    directives: tuple[str, ...] = (),
    described: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[str, str] | str:
    """(file path, qualified name in that file) of a test id, or why it cannot be found.

    - pytest: `path.py::Class::test[param]` -> (`path.py`, `Class.test`);
    - unittest: `pkg.mod.Class.test` -> the longest module prefix that is a file;
    - django (runtests.py): `test (app.mod.Class)` -> `tests/app/mod.py`, `Class.test` (a
      description, through `described`: `selection.django_descriptions`);
    - sympy (bin/test): a function name -> the one directive file that defines it at the top.
    """
    if runner == "pytest":
        path, _, rest = test.partition("::")
        if not rest or path not in files:
            return f"{test}: no file {path} in the workspace"
        qual = rest.split("[", 1)[0].replace("::", ".")
        return path, qual
    if runner in ("unittest", "django"):
        dotted = test
        bases: tuple[str, ...] = ("",)
        if runner == "django":
            labels = django_label(test, described)
            if len(labels) != 1:
                return f"{test}: {'no' if not labels else len(labels)} Django test(s) of the command bear this name"
            dotted = labels[0]
            bases = ("tests/", "")
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            for base in bases:
                path = base + "/".join(parts[:cut]) + ".py"
                if path in files:
                    return path, ".".join(parts[cut:])
        return f"{test}: no module file for it in the workspace"
    if runner == "sympy":
        for path in directives:
            if path in files:
                return path, test
        return f"{test}: none of the test command's files holds it"
    return f"{test}: the runner is not one the grader can run test by test"
