"""Expected values in a test's equality assertions (`assert a == b`, `self.assertEqual(a, b)`,
`assert_equal(a, b)`): which side is the expectation, and a value of its type that must
compare unequal to it, as source text (a literal) or as a function that changes a computed
value at run time. The twins and the marks use them (`agent_env.grading.canaries`): the
expectation twin puts the changed value in the assertion, a mark's wrapper compares the
computed value with it just before the real comparison."""

from __future__ import annotations

import ast
import random

from agent_env.grading.names import idents

EQUALITY_METHODS = frozenset({"assertEqual", "assertEquals", "failUnlessEqual", "assert_equal"})


def literal_like(node: ast.expr) -> bool:
    """An expression that reads as an expected value: a constant, a container or unary
    minus of constants, or an ALL_CAPS name."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return literal_like(node.operand)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(literal_like(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is None or literal_like(k) for k in node.keys) and all(literal_like(v) for v in node.values)
    return isinstance(node, ast.Name) and node.id.isupper()


def expected_side(statement: ast.stmt) -> ast.expr | None:
    """The expected side of a top-level equality assertion, or None."""
    if isinstance(statement, ast.Assert):
        test = statement.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            left, right = test.left, test.comparators[0]
            return left if literal_like(left) and not literal_like(right) else right
        return None
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in EQUALITY_METHODS and len(call.args) >= 2 and not any(isinstance(a, ast.Starred) for a in call.args):
            first, second = call.args[0], call.args[1]
            return first if literal_like(first) and not literal_like(second) else second
    return None


def changed_literal(value: object, rng: random.Random) -> object:
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
        extra = changed_literal(items[-1], rng) if items else rng.randint(1, 97)
        return kind([*items, rng.randint(1, 97) if extra is None else extra])
    if kind is set:
        return {*value, *idents(rng, 1)}  # type: ignore[misc]
    if kind is dict:
        return {**value, idents(rng, 1)[0]: rng.randint(1, 97)}  # type: ignore[dict-item]
    return None


def literal_replacement(node: ast.expr, rng: random.Random) -> str | None:
    """Source text of a changed literal for a literal expected side, or None."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    changed = changed_literal(value, rng)
    if changed is None or changed == value:  # inf stays inf
        return None
    text = repr(changed)
    try:
        same = ast.literal_eval(text) == changed and type(ast.literal_eval(text)) is type(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return text if same and "\n" not in text else None


def change_helper(name: str, marker: str, rng: random.Random) -> str:
    """A function that changes a computed expected value the way `changed_literal` changes
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
