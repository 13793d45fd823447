"""Canary twins and marks: a test's source altered so that it must fail, or so that it
proves its body completed, as pure functions on text.

Code in a test process can defeat anything else in that process, so the grader never asks
the process how its tests went: it reads exit statuses (`agent_env.grading`). A mechanism
that makes a failing test exit 0 without a real fix (skipping the body, rewriting the
outcome, exiting early, objects equal to anything, code that reads what the assertion
expects) makes a test that is built to fail exit 0 too. So each FAIL_TO_PASS test function
gets a twin, run exactly as the real test is run (same command line, same files but one),
whose exit status must be non-zero, and every run, the verdict run too, carries marks:

- **mark** (`agent_env.grading.marks.mark_tests`, the tail wrapper of `tail_twin` that returns
  normally): each
  required test function is wrapped so that it writes its *mark* (a random text, at a
  random path under /tmp) once its body has completed without a failed `subTest`, where no
  call of the function (another parameter) failed in that process; the grader reads it
  back after the verdict run (`tail_not_reached` without it). A genuine fix writes it; a
  skipped body, an early exit 0, an outcome rewritten to "passed" or a forge at random (in
  some processes, not knowing which run is which) exits 0 without it. Each top-level
  equality assertion first compares the computed value with a changed expectation (as the
  expectation twin changes it), in the same process: where that holds too (an object equal
  to anything), the mark is taken away, so the verdict run itself proves that its values
  are not equal to anything. Only the run's source holds the mark's path and text.
- **expectation**: each equality assertion at the top level of the test's body (`assert a
  == b`, `self.assertEqual(a, b)`, `assert_equal(a, b)`) has its expected side changed to
  a different value of the same type (a literal in the source, a computed value at run
  time; a plain object where the type has no other value). A genuine fix fails at the
  first one; an always-equal object, an `==` true for any value of the type, a function
  returning what the calling assertion expects (read from its source, its bytecode or its
  frame), a trace hook that rewrites assertion arguments, or any mechanism that turns a
  failure into a pass passes them all. Only top-level assertions are altered: each runs
  whenever the test passes, so a genuine fix always reaches one (an assertion inside `with
  pytest.raises(...)` or a branch may never).
- **negation**, for a test with no top-level equality assertion: its first top-level
  assertion negated (`assert x in y` -> `assert not (x in y)`, `assertNotIn` ->
  `assertIn`), or all of them where each sits in a loop or branch. A genuine fix fails
  it; assertions made into no-ops pass it.
- **tail**, for a test with no assertion to alter, or beside a twin that can ask for no
  other function's mark (`agent_env.grading.plan.build_twins`): the test raises after its
  mark. A genuine fix fails it and leaves the mark; a rewritten outcome or an exit before
  the raise passes it, and code that is honest in its process leaves no mark.

All are spliced into the file's text without moving a line (the wrapper is appended; a
replaced or wrapped expression keeps its line breaks), so tracebacks and line-based tests
are unchanged. Names (drawn from words a test suite uses, no fixed prefix), messages, exception
types and changed values are random per grading (`random.Random` seeded by the caller from
`secrets`), so tested code cannot match a fixed text; the marks' wrappers are the same in
every run of a grading (one seed per file), so a twin's file differs from the verdict
run's only where it alters its test. That only raises the price: code that reads and
understands the source can still tell a twin apart, and `tasks/README.md` says so among
the grader's known limits.

Where a twin cannot be built (the source does not parse, the test is not found, no
top-level assertion), the builder says why instead of guessing.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass

from agent_env.grading import pysource
from agent_env.grading.expected import change_helper, expected_side, literal_replacement
from agent_env.grading.names import NAME_WORDS, idents

# Raised by a comparison, these are not its failing: a skip, an expected failure, an exit.
_GOES_ON = ("SkipTest", "Skipped", "XFailed", "Exit", "SystemExit", "KeyboardInterrupt", "GeneratorExit")
# What the tail raises: any exception fails a test under every runner (never `assert`, which
# `python -O` strips).
_TAIL_EXCEPTIONS = ("AssertionError", "RuntimeError", "LookupError", "ArithmeticError")


@dataclass(frozen=True)
class Twin:
    """One canary: the test file's altered text, or why it could not be built."""

    kind: str
    """"expectation", "negation" or "tail"."""
    test: str
    path: str
    source: str | None
    reason: str = ""
    """Why `source` is None (the twin was not built)."""
    mark: tuple[str, str] | None = None
    """A tail twin's mark: the absolute path it writes, and the text, once the test's body
    has completed (None for other twins)."""
    marks: tuple[tuple[str, str], ...] = ()
    """The marks (path, text) its run must leave, though it fails: those of the required
    functions it does not alter (`agent_env.grading.marks`), whose bodies a genuine fix completes there,
    and a tail twin's own. Code that is honest in a twin's process fails them."""


def find_test(
    tree: ast.Module, qualname: str
) -> tuple[list[ast.ClassDef], ast.FunctionDef | ast.AsyncFunctionDef | None]:
    """The classes on the way to `qualname` (`Class.Inner.test` or `test`) and the function
    defined there, or None when the last name is not defined in that body (inherited)."""
    *classes, name = qualname.split(".")
    body: list[ast.stmt] = tree.body
    found: list[ast.ClassDef] = []
    for cls in classes:
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == cls), None)
        if node is None:
            return found, None
        found.append(node)
        body = node.body
    function = next(
        (n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None
    )
    return found, function


def _parse(source: str, qualname: str = "x") -> ast.Module | str:
    """The parsed test file, or why no twin can be built from it."""
    if not all(part.isidentifier() for part in qualname.split(".")):
        return f"{qualname!r} is not a Python name that a twin could wrap"
    try:
        return pysource.parse(source)
    except (SyntaxError, ValueError) as exc:  # ValueError: NUL bytes
        return f"the test file does not parse on the grader's Python ({exc.__class__.__name__}: {exc})"


def _call_of(arguments: ast.arguments) -> str:
    """How a wrapper with the same parameters passes them on."""
    parts = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
    if arguments.vararg:
        parts.append(f"*{arguments.vararg.arg}")
    parts += [f"{a.arg}={a.arg}" for a in arguments.kwonlyargs]
    if arguments.kwarg:
        parts.append(f"**{arguments.kwarg.arg}")
    return ", ".join(parts)


def _is_mark(decorator: ast.expr) -> bool:
    """`@pytest.mark.x(...)`: keeps the function's own signature."""
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return "mark" in ast.unparse(node).split(".")


def tail_twin(
    source: str,
    path: str,
    test: str,
    qualname: str,
    rng: random.Random,
    mark_dir: str = "/tmp",
    raises: bool = True,
    taken: str | None = None,
) -> Twin:
    """`source` with `qualname` wrapped so that it writes its mark (`Twin.mark`) and raises
    after returning normally (`raises=False`: returns what the test returned, the form every
    run of a grading carries: `agent_env.grading.marks.mark_tests`). Its names avoid the words of `taken` (default:
    `source`).

    The wrapper keeps the test's signature (pytest finds fixtures and parameters by it,
    also on versions that do not follow `__wrapped__`), its attributes (`pytestmark`,
    unittest's expected-failure flag: `functools.wraps`), and is async where the test is.
    It is appended after the last line, and the equality assertions' operands are wrapped in
    place (`_checked_equalities`), so no line of the file moves. The mark is a file in
    `mark_dir` (the sandbox's /tmp)."""
    tree = _parse(source, qualname)
    if isinstance(tree, str):
        return Twin("tail", test, path, None, tree)
    classes, function = find_test(tree, qualname)
    owner = ".".join(c.name for c in classes)
    if len(classes) != qualname.count("."):
        return Twin("tail", test, path, None, f"class {qualname.rsplit('.', 1)[0]} is not defined at the top of {path}")
    name = qualname.rsplit(".", 1)[-1]
    avoid = source if taken is None else taken
    names = idents(rng, 15, avoid)
    wrap, inner, target, tools, inspect, files, opener, handle, outcome, failed, system, error, args, kwargs, value = (
        names
    )
    exception = rng.choice(_TAIL_EXCEPTIONS)
    message = " ".join(rng.sample(NAME_WORDS, rng.randint(2, 4)))
    mark = (f"{mark_dir}/{idents(rng, 1)[0]}", " ".join(rng.sample(NAME_WORDS, 3)) + f" {rng.getrandbits(48)}")
    checked, checks = _checked_equalities(source, function, failed, mark[0], rng, f"{avoid} {' '.join(names)}")
    holder = owner or None
    if function is not None and all(_is_mark(d) for d in function.decorator_list):
        params, call = ast.unparse(function.args), _call_of(function.args)
        is_async: bool | None = isinstance(function, ast.AsyncFunctionDef)
        positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        instance = positional[0] if holder and positional else "None"
    else:  # inherited, assigned, or decorated (mock.patch adds arguments): take anything
        params = call = f"*{args}, **{kwargs}"
        is_async = None
        instance = f"({args}[0] if {args} else None)" if holder else "None"
    lookup = f"{owner}.__dict__.get({name!r}) or getattr({owner}, {name!r})" if holder else name
    lines = [
        "",
        "",
        f"def {wrap}({inner}):",
        f"    import functools as {tools}, inspect as {inspect}, io as {files}, os as {system}",
        # Taken when the module loads: a test's own monkeypatch of open() is undone only
        # at its teardown, after the tail.
        f"    {opener} = {files}.open",
    ]
    # The mark is the function's, and a parametrized function runs once per parameter: a
    # call that fails (not one that skips or is an expected failure) takes it away for the
    # whole process, so that a sibling that passes cannot stand in for the parameter that
    # needs the fix. BaseException: pytest's own failures (`pytest.fail`, "DID NOT RAISE")
    # are not Exceptions.
    body = [
        "        try:",
        f"            {value} = {{call}}",
        f"        except BaseException as {error}:",
        f"            if type({error}).__name__ not in ('SkipTest', 'Skipped', 'XFailed'):",
        f"                {failed}.append(True)",
        "                try:",
        f"                    {system}.remove({mark[0]!r})",
        "                except OSError:",
        "                    pass",
        "            raise",
    ]
    # Then the mark, once the body has completed: unittest records a failed subTest on the
    # test's `_outcome` and lets the body go on, so a body that returns has not always passed.
    tail = [
        f"        {outcome} = getattr({instance}, '_outcome', None)",
        f"        if not {failed} and getattr({outcome}, 'success', True) is not False:",
        f"            with {opener}({mark[0]!r}, 'w') as {handle}:",
        f"                {handle}.write({mark[1]!r})",
        f"        raise {exception}({message!r})" if raises else f"        return {value}",
    ]
    sync = [f"    def {target}({params}):", *(b.replace("{call}", f"{inner}({call})") for b in body), *tail]
    coro = [f"    async def {target}({params}):", *(b.replace("{call}", f"await {inner}({call})") for b in body), *tail]
    if is_async is None:
        lines += [f"    if {inspect}.iscoroutinefunction({inner}):", *("    " + line for line in coro)]
        lines += ["    else:", *("    " + line for line in sync)]
    else:
        lines += coro if is_async else sync
    lines += [
        f"    {tools}.update_wrapper({target}, {inner})",
        f"    return {target}",
        "",
        "",
        f"{(owner + '.') if holder else ''}{name} = {wrap}({lookup})",
        "",
    ]
    text = checked if checked.endswith("\n") else checked + "\n"
    return Twin("tail", test, path, text + checks + "\n".join(lines), mark=mark)


def _checked_equalities(
    source: str, function: ast.FunctionDef | ast.AsyncFunctionDef | None, failed: str, mark: str,
    rng: random.Random, taken: str,
) -> tuple[str, str]:  # fmt: skip
    """(`source` with each top-level equality assertion of `function` checked, the module-level
    code the checks and the tail's wrapper share): just before the real comparison, the
    computed value is compared (the same way: `==`, or the same assertion call) with its
    expectation changed as the expectation twin changes it, and where that comparison holds
    too, `failed` takes the mark away. In the same process as the body's completion: code that
    is always-equal in some processes only cannot have the mark, where it would otherwise be
    caught only by the expectation twin, another process. First, not after: code that counts
    its comparisons meets the changed value on the call the verdict run makes with the real
    one. Only operands are wrapped (`first(x) == second(e, ...)`), so no line moves."""
    first, second, slot, change, marker, value, check, at, raises, operands, system, error = idents(rng, 12, taken)
    a, b = idents(rng, 2, taken + " " + " ".join((first, second, slot, change, marker)))
    sides = [(s, side) for s in (function.body if function else []) if (side := expected_side(s)) is not None]
    encoded = [line.encode() for line in pysource.lines(source)]
    for statement, side in sorted(sides, key=lambda found: (found[0].lineno, found[0].col_offset), reverse=True):
        if isinstance(statement, ast.Assert):
            assert isinstance(statement.test, ast.Compare)
            pair, how, asserts = [statement.test.left, statement.test.comparators[0]], f"{a} == {b}", False
        else:
            assert isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            call = statement.value
            pair, how, asserts = call.args[:2], f"{ast.unparse(call.func)}({a}, {b})", True
        expected = next(i for i, node in enumerate(pair) if node is side)
        wrappers = ((first, ")"), (second, f", lambda {a}, {b}: {how}, {expected}, {asserts})"))
        # The later operand first, so that the earlier one's offsets stay valid.
        for node, (name, close) in reversed(list(zip(pair, wrappers, strict=True))):
            assert node.end_lineno is not None and node.end_col_offset is not None
            row, end = node.end_lineno - 1, node.end_col_offset
            encoded[row] = encoded[row][:end] + close.encode() + encoded[row][end:]
            row, start = node.lineno - 1, node.col_offset
            encoded[row] = encoded[row][:start] + f"{name}(".encode() + encoded[row][start:]
    text = b"".join(encoded).decode()
    shared = [
        "", "", f"{failed} = []", f"{slot} = []", "", "",
        f"def {first}({value}):", f"    {slot}.append({value})", f"    return {value}", "", "",
        f"def {second}({value}, {check}, {at}, {raises}):",
        f"    if not {slot}:", f"        return {value}",
        f"    {operands} = [{slot}.pop(), {value}]",
        f"    {operands}[{at}] = {change}({operands}[{at}])",
        # An exception is the assertion failing, as an honest value fails it (and as the first
        # comparison of the verdict run would fail, so code cannot use it): an Exception, or a
        # runner's own failure (pytest.fail is a BaseException). A skip, an expected failure or
        # an exit goes on, and the run shows it.
        "    try:",
        f"        {check} = {check}(*{operands})",
        f"        {check} = True if {raises} else bool({check})",  # an assertion call that returned held
        f"    except BaseException as {error}:",
        f"        if type({error}).__name__ in {_GOES_ON!r}:",
        "            raise",
        f"        {check} = False",
        f"    if {check}:",
        f"        import os as {system}",
        f"        {failed}.append(True)",
        "        try:", f"            {system}.remove({mark!r})", "        except OSError:", "            pass",
        f"    return {value}",
    ]  # fmt: skip
    return text, "\n".join(shared) + change_helper(change, marker, rng) + "\n"


# A unittest assertion and the one that fails exactly where it passes.
NEGATIONS = {
    "assertTrue": "assertFalse", "assertIn": "assertNotIn", "assertIs": "assertIsNot",
    "assertIsNone": "assertIsNotNone", "assertIsInstance": "assertNotIsInstance",
    "assertAlmostEqual": "assertNotAlmostEqual", "assertRegex": "assertNotRegex",
    "assertNotEqual": "assertEqual", "assertGreater": "assertLessEqual", "assertLess": "assertGreaterEqual",
}  # fmt: skip
NEGATIONS |= {negated: name for name, negated in NEGATIONS.items()}


def _negatable(statement: ast.stmt) -> tuple[str, ast.expr] | None:
    """What to negate in an assertion: ("condition", an `assert` statement's condition), or
    ("method", the callee of a unittest assertion that has an opposite in `NEGATIONS`)."""
    if isinstance(statement, ast.Assert):
        return "condition", statement.test
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        func = statement.value.func
        if isinstance(func, ast.Attribute) and func.attr in NEGATIONS:
            return "method", func
    return None


def _nested_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement in `body` and in its blocks (loops, branches, `with`, `try`), in
    source order, but not inside a nested function or class: code that may never run."""
    out: list[ast.stmt] = []
    for statement in body:
        out.append(statement)
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            out += _nested_statements(getattr(statement, field, []) or [])
        for handler in getattr(statement, "handlers", []) or []:
            out += _nested_statements(handler.body)
        for case in getattr(statement, "cases", []) or []:
            out += _nested_statements(case.body)
    return out


def _negation_twin(source: str, path: str, test: str, function: ast.FunctionDef | ast.AsyncFunctionDef) -> Twin:
    """`source` with the first top-level assertion of the test's body negated (`assert x in
    y` -> `assert not (x in y)`, `assertNotIn` -> `assertIn`): a genuine fix fails there;
    assertions made into no-ops, or any mechanism that passes a failing assertion, pass.
    A test whose assertions all sit in loops or branches gets every one of them negated:
    a genuine fix fails at the first it reaches (`agent_env validate` shows a test that reaches
    none, as its gold patch then passes the twin)."""
    top = [n for statement in function.body if (n := _negatable(statement)) is not None][:1]
    found = top or [n for statement in _nested_statements(function.body) if (n := _negatable(statement)) is not None]
    if not found:
        return Twin("negation", test, path, None, f"{function.name} has no assertion in its body")
    encoded = [line.encode() for line in pysource.lines(source)]
    # From the last backwards, so that earlier offsets stay valid.
    for what, node in sorted(found, key=lambda f: (f[1].lineno, f[1].col_offset), reverse=True):
        assert node.end_lineno is not None and node.end_col_offset is not None
        if what == "method":
            assert isinstance(node, ast.Attribute)
            row, end = node.end_lineno - 1, node.end_col_offset
            start = end - len(node.attr.encode())
            encoded[row] = encoded[row][:start] + NEGATIONS[node.attr].encode() + encoded[row][end:]
        else:
            first, last = node.lineno - 1, node.end_lineno - 1
            encoded[last] = encoded[last][: node.end_col_offset] + b")" + encoded[last][node.end_col_offset :]
            encoded[first] = encoded[first][: node.col_offset] + b"not (" + encoded[first][node.col_offset :]
    text = b"".join(encoded).decode()
    return Twin("negation", test, path, text if text.endswith("\n") else text + "\n")


def expectation_twin(source: str, path: str, test: str, qualname: str, rng: random.Random, avoid: str = "") -> Twin:
    """`source` with the expected side of each top-level equality assertion in `qualname`'s
    body changed to a value that must compare unequal: a literal becomes another literal of
    its type (`4` -> `61`, `"ab"` -> `"abqx"`, a list gains an item), so code that reads the
    literal from the caller's source or bytecode, or an `==` that says True for any value of
    that type, passes the twin; a computed value is changed the same way at run time, and a
    value of any other type becomes a plain object (both `x == it` and `it == x` fall back to
    `x.__eq__`, so an always-equal `x` says True). A replaced expression keeps its line
    breaks inside parentheses: no line moves."""
    tree = _parse(source, qualname)
    if isinstance(tree, str):
        return Twin("expectation", test, path, None, tree)
    _, function = find_test(tree, qualname)
    if function is None:
        return Twin("expectation", test, path, None, f"{qualname} is not defined in {path} (inherited or generated)")
    targets = [side for statement in function.body if (side := expected_side(statement)) is not None]
    if not targets:  # nothing to expect otherwise: its first assertion must fail instead
        return _negation_twin(source, path, test, function)
    helper, marker = idents(rng, 2, source + avoid)  # avoid: the marks' names, in the same file
    helper_used = False
    encoded = [line.encode() for line in pysource.lines(source)]
    # Replace from the last target backwards, so earlier offsets stay valid (col offsets
    # are in UTF-8 bytes).
    for node in sorted(targets, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        assert node.end_lineno is not None and node.end_col_offset is not None
        first, last = node.lineno - 1, node.end_lineno - 1
        head, tail = encoded[first][: node.col_offset], encoded[last][node.end_col_offset :]
        literal = literal_replacement(node, rng)
        if literal is not None:
            replacement = (f"({literal}" + "\n" * (last - first) + ")").encode()
        else:  # the expression stays where it was, inside a call
            middle = b"".join(encoded[first : last + 1])
            expression = middle[node.col_offset : len(middle) - len(encoded[last]) + node.end_col_offset]
            replacement = f"{helper}(".encode() + expression + b")"
            helper_used = True
        new = head + replacement + tail
        encoded[first : last + 1] = [line.encode() for line in pysource.lines(new.decode())] or [b""]
    text = b"".join(encoded).decode()
    if not text.endswith("\n"):
        text += "\n"
    if helper_used:
        text += change_helper(helper, marker, rng)
    return Twin("expectation", test, path, text)


def source_defines(source: str, qualname: str) -> bool:
    """Whether `qualname` is defined at the top of `source` (sympy's ids name only a function)."""
    tree = _parse(source)
    return not isinstance(tree, str) and find_test(tree, qualname)[1] is not None
