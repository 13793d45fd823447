"""Fresh identifiers for the canary twins' code, drawn anew for each grading from words a
test suite uses (no fixed prefix, no hex), so that code under test cannot spot a twin by a
name pattern."""

from __future__ import annotations

import random
import re

NAME_WORDS = (
    "check", "run", "call", "case", "body", "wrapped", "result", "value", "expected", "helper",
    "inner", "outer", "target", "probe", "item", "step", "verify", "apply", "make", "build",
    "local", "base", "orig", "saved", "cached", "real", "plain", "data", "sample", "method",
    "func", "fixture", "param", "entry", "record", "state", "current", "other", "actual", "want",
)  # fmt: skip


def idents(rng: random.Random, count: int, source: str = "") -> list[str]:
    """`count` distinct fresh identifiers that `source` does not use (as a whole word)."""
    used = set(re.findall(r"\w+", source))  # a name is a run of word characters: one set, not a search per name
    names: list[str] = []
    while len(names) < count:
        words = rng.sample(NAME_WORDS, rng.randint(2, 3))
        # never two leading underscores: a class body would mangle the name
        name = "_" * rng.randint(0, 1) + "_".join(words) + (str(rng.randint(0, 99)) if rng.random() < 0.4 else "")
        if name not in names and name not in used:
            names.append(name)
    return names
