"""Canary twins: a test's source altered so that it must fail, as pure functions on text.

Code in a test process can defeat anything else in that process, so the grader never asks
the process how its tests went: it reads exit statuses (`agent_env.grading`). A mechanism
that makes a failing test exit 0 without a real fix (skipping the body, rewriting the
outcome, exiting early, objects equal to anything, code that reads what the assertion
expects) makes a test that is built to fail exit 0 too. So each FAIL_TO_PASS test gets
twins, run exactly as the real test is run (same command line, same files but one), whose
exit status must be non-zero:

- **tail**: the test function wrapped so that it raises after it returns normally. A
  genuine fix fails it (the test body completes, then the raise); a skipped body, an
  outcome rewritten to "passed", an expected failure, or an exit before the raise pass it.
  Just before the raise, the tail writes its *mark* (a random text, at a random path under
  /tmp) when the body has completed without a failed `subTest` and no call of the function
  (another parameter) failed in that process; the grader reads it back
  from the twin's sandbox after the run. A genuine fix writes it; an honest run of unfixed
  code fails in the body and does not, so code that forges a pass at random (in some
  processes, not knowing which run is which) is caught in the tail twin whichever way it
  goes there: a forged pass exits 0, an honest run leaves no mark (`tail_not_reached`).
  Only the twin's source holds the mark's path and text.
- **expectation**: each equality assertion at the top level of the test's body (`assert a
  == b`, `self.assertEqual(a, b)`, `assert_equal(a, b)`) has its expected side changed to
  a different value of the same type (a literal in the source, a computed value at run
  time; a plain object where the type has no other value). A genuine fix fails at the
  first one; an always-equal object, an `==` true for any value of the type, a function
  returning what the calling assertion expects (read from its source, its bytecode or its
  frame), or a trace hook that rewrites assertion arguments passes them all. Only
  top-level assertions are altered: each runs whenever the test passes, so a genuine fix
  always reaches one (an assertion inside `with pytest.raises(...)` or a branch may never).
- **negation**, for a test with no top-level equality assertion: its first top-level
  assertion negated (`assert x in y` -> `assert not (x in y)`, `assertNotIn` ->
  `assertIn`), or all of them where each sits in a loop or branch. A genuine fix fails
  it; assertions made into no-ops pass it.

Both are spliced into the file's text without moving a line (the wrapper is appended; a
replaced expression keeps its line breaks), so tracebacks and line-based tests are
unchanged. Names (drawn from words a test suite uses, no fixed prefix), messages, exception
types and changed values are random per grading (`random.Random` seeded by the caller from
`secrets`), so tested code cannot match a fixed text. That only raises the price: code
that reads and understands the twin's source can still tell it apart, and `tasks/README.md`
says so among the grader's known limits.

Where a twin cannot be built (the source does not parse, the test is not found, no
top-level assertion), the builder says why instead of guessing.
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass

EQUALITY_METHODS = frozenset({"assertEqual", "assertEquals", "failUnlessEqual", "assert_equal"})
# What the tail raises: any exception fails a test under every runner (never `assert`, which
# `python -O` strips).
_TAIL_EXCEPTIONS = ("AssertionError", "RuntimeError", "LookupError", "ArithmeticError")


@dataclass(frozen=True)
class Twin:
    """One canary: the test file's altered text, or why it could not be built."""

    kind: str
    """"tail" or "expectation"."""
    test: str
    path: str
    source: str | None
    reason: str = ""
    """Why `source` is None (the twin was not built)."""
    mark: tuple[str, str] | None = None
    """A tail twin's mark: the absolute path it writes, and the text, once the test's body
    has completed (None for other twins)."""


# Twins' own names read like a test suite's helpers (no fixed prefix, no hex), drawn anew for
# each grading, so that code under test cannot spot a twin by a name pattern.
_NAME_WORDS = (
    "check", "run", "call", "case", "body", "wrapped", "result", "value", "expected", "helper",
    "inner", "outer", "target", "probe", "item", "step", "verify", "apply", "make", "build",
    "local", "base", "orig", "saved", "cached", "real", "plain", "data", "sample", "method",
    "func", "fixture", "param", "entry", "record", "state", "current", "other", "actual", "want",
)  # fmt: skip


def _idents(rng: random.Random, count: int, source: str = "") -> list[str]:
    """`count` distinct fresh identifiers that `source` does not use."""
    names: list[str] = []
    while len(names) < count:
        words = rng.sample(_NAME_WORDS, rng.randint(2, 3))
        # never two leading underscores: a class body would mangle the name
        name = "_" * rng.randint(0, 1) + "_".join(words) + (str(rng.randint(0, 99)) if rng.random() < 0.4 else "")
        if name not in names and not re.search(rf"\b{re.escape(name)}\b", source):
            names.append(name)
    return names


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
        return ast.parse(source)
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


def tail_twin(source: str, path: str, test: str, qualname: str, rng: random.Random, mark_dir: str = "/tmp") -> Twin:
    """`source` with `qualname` wrapped so that it writes its mark (`Twin.mark`) and raises
    after returning normally.

    The wrapper keeps the test's signature (pytest finds fixtures and parameters by it,
    also on versions that do not follow `__wrapped__`), its attributes (`pytestmark`,
    unittest's expected-failure flag: `functools.wraps`), and is async where the test is.
    It is appended after the last line, so no line of the file moves. The mark is a file in
    `mark_dir` (the sandbox's /tmp)."""
    tree = _parse(source, qualname)
    if isinstance(tree, str):
        return Twin("tail", test, path, None, tree)
    classes, function = find_test(tree, qualname)
    owner = ".".join(c.name for c in classes)
    if len(classes) != qualname.count("."):
        return Twin("tail", test, path, None, f"class {qualname.rsplit('.', 1)[0]} is not defined at the top of {path}")
    name = qualname.rsplit(".", 1)[-1]
    names = _idents(rng, 14, source)
    wrap, inner, target, tools, inspect, files, opener, handle, outcome, failed, system, error, args, kwargs = names
    exception = rng.choice(_TAIL_EXCEPTIONS)
    message = " ".join(rng.sample(_NAME_WORDS, rng.randint(2, 4)))
    mark = (f"{mark_dir}/{_idents(rng, 1)[0]}", " ".join(rng.sample(_NAME_WORDS, 3)) + f" {rng.getrandbits(48)}")
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
        f"    {failed} = []",
    ]
    # The mark is the function's, and a parametrized function runs once per parameter: a
    # call that fails (not one that skips or is an expected failure) takes it away for the
    # whole process, so that a sibling that passes cannot stand in for the parameter that
    # needs the fix. BaseException: pytest's own failures (`pytest.fail`, "DID NOT RAISE")
    # are not Exceptions.
    body = [
        "        try:",
        "            {call}",
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
        f"        raise {exception}({message!r})",
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
    text = source if source.endswith("\n") else source + "\n"
    return Twin("tail", test, path, text + "\n".join(lines), mark=mark)


def _literal_like(node: ast.expr) -> bool:
    """An expression that reads as an expected value: a constant, a container or unary
    minus of constants, or an ALL_CAPS name."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _literal_like(node.operand)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_literal_like(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is None or _literal_like(k) for k in node.keys) and all(_literal_like(v) for v in node.values)
    return isinstance(node, ast.Name) and node.id.isupper()


def _expected_side(statement: ast.stmt) -> ast.expr | None:
    """The expected side of a top-level equality assertion, or None."""
    if isinstance(statement, ast.Assert):
        test = statement.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            left, right = test.left, test.comparators[0]
            return left if _literal_like(left) and not _literal_like(right) else right
        return None
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in EQUALITY_METHODS and len(call.args) >= 2 and not any(isinstance(a, ast.Starred) for a in call.args):
            first, second = call.args[0], call.args[1]
            return first if _literal_like(first) and not _literal_like(second) else second
    return None


def _changed_literal(value: object, rng: random.Random) -> object:
    """A value of `value`'s own type that differs from it, or None where there is none
    (None, Ellipsis): an `==` that says True for any value of a type says it here too."""
    kind = type(value)
    if kind is bool:
        return not value
    if kind in (int, float, complex):
        changed = value + rng.randint(1, 97) + (0.5 if kind is float else 0)  # type: ignore[operator]
        return changed if changed != value else value * 2  # type: ignore[operator]  # 1e20 + 61.5 == 1e20
    if kind is str:
        return value + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 5)))  # type: ignore[operator]
    if kind is bytes:
        return value + bytes(rng.randint(97, 122) for _ in range(rng.randint(2, 5)))  # type: ignore[operator]
    if kind in (list, tuple):
        items = list(value)  # type: ignore[call-overload]
        extra = _changed_literal(items[-1], rng) if items else rng.randint(1, 97)
        return kind([*items, rng.randint(1, 97) if extra is None else extra])
    if kind is set:
        return {*value, *_idents(rng, 1)}  # type: ignore[misc]
    if kind is dict:
        return {**value, _idents(rng, 1)[0]: rng.randint(1, 97)}  # type: ignore[dict-item]
    return None


def _literal_replacement(node: ast.expr, rng: random.Random) -> str | None:
    """Source text of a changed literal for a literal expected side, or None."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    changed = _changed_literal(value, rng)
    if changed is None or changed == value:  # inf stays inf
        return None
    text = repr(changed)
    try:
        same = ast.literal_eval(text) == changed and type(ast.literal_eval(text)) is type(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return text if same and "\n" not in text else None


def _change_helper(name: str, marker: str, rng: random.Random) -> str:
    """A function that changes a computed expected value the way `_changed_literal` changes
    a literal one, at run time; a value of another type becomes a plain object."""
    k = rng.randint(1, 97)
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 5)))
    return (
        f"\n\nclass {marker}:\n    __slots__ = ()\n\n\n"
        f"def {name}(value):\n"
        f"    kind = type(value)\n"
        f"    if kind is bool:\n        return not value\n"
        f"    if kind in (int, float, complex):\n        changed = value + {k}\n"
        f"        return changed if changed != value else {marker}()\n"
        f"    if kind is str:\n        return value + {word!r}\n"
        f"    if kind is bytes:\n        return value + {word.encode()!r}\n"
        f"    if kind in (list, tuple, set, frozenset):\n        return kind([*value, {marker}()])\n"
        f"    if kind is dict:\n        return {{**value, {marker}(): {k}}}\n"
        f"    return {marker}()\n"
    )


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
    encoded = [line.encode() for line in source.splitlines(keepends=True)]
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


def expectation_twin(source: str, path: str, test: str, qualname: str, rng: random.Random) -> Twin:
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
    targets = [side for statement in function.body if (side := _expected_side(statement)) is not None]
    if not targets:  # nothing to expect otherwise: its first assertion must fail instead
        return _negation_twin(source, path, test, function)
    helper, marker = _idents(rng, 2, source)
    helper_used = False
    lines = source.splitlines(keepends=True)
    encoded = [line.encode() for line in lines]
    # Replace from the last target backwards, so earlier offsets stay valid (col offsets
    # are in UTF-8 bytes).
    for node in sorted(targets, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        assert node.end_lineno is not None and node.end_col_offset is not None
        first, last = node.lineno - 1, node.end_lineno - 1
        head, tail = encoded[first][: node.col_offset], encoded[last][node.end_col_offset :]
        literal = _literal_replacement(node, rng)
        if literal is not None:
            replacement = (f"({literal}" + "\n" * (last - first) + ")").encode()
        else:  # the expression stays where it was, inside a call
            middle = b"".join(encoded[first : last + 1])
            expression = middle[node.col_offset : len(middle) - len(encoded[last]) + node.end_col_offset]
            replacement = f"{helper}(".encode() + expression + b")"
            helper_used = True
        new = head + replacement + tail
        encoded[first : last + 1] = new.splitlines(keepends=True) or [b""]
    text = b"".join(encoded).decode()
    if not text.endswith("\n"):
        text += "\n"
    if helper_used:
        text += _change_helper(helper, marker, rng)
    return Twin("expectation", test, path, text)


def source_defines(source: str, qualname: str) -> bool:
    """Whether `qualname` is defined at the top of `source` (sympy's ids name only a function)."""
    tree = _parse(source)
    return not isinstance(tree, str) and find_test(tree, qualname)[1] is not None
