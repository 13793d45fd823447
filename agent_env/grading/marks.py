"""Marks in every run of a grading: each required test function wrapped as a tail twin wraps
it (`agent_env.grading.canaries.tail_twin`), returning normally, so that a run proves which
bodies completed (`agent_env.grading.verdict` states the contract)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from agent_env.grading import pysource
from agent_env.grading.canaries import tail_twin


@dataclass(frozen=True)
class Marked:
    """A test file with every required test function marked (`mark_tests`)."""

    source: str
    marks: dict[str, tuple[str, str]]
    """Each marked function's mark (path, text), by qualname."""
    reasons: dict[str, str]
    """Why a function got no mark, by qualname."""


def mark_tests(
    source: str,
    path: str,
    qualnames: list[str],
    seed: int,
    mark_dir: str = "/tmp",
    raising: str | None = None,
    avoid: str | None = None,
) -> Marked:
    """`source` with each function of `qualnames` wrapped as a tail twin wraps it (its mark
    written once its body completes, its equalities checked against changed expectations),
    but returning normally, or raising after its mark for `raising`. Every run of a grading
    carries these wrappers, the verdict run too, so that no run tells itself from another by
    them; the same `seed` gives the same names, paths and texts in each run's copy of the
    file, so two runs' copies differ only where a twin altered its test. A twin's copy
    passes the verdict run's text before marking as `avoid`: the names are drawn clear of
    its words, not of the twin's (which differ), so the same seed draws the same names."""
    rng = random.Random(seed)
    marks: dict[str, tuple[str, str]] = {}
    reasons: dict[str, str] = {}
    taken = source if avoid is None else avoid
    for qualname in qualnames:
        before = len(pysource.lines(source))
        twin = tail_twin(source, path, qualname, qualname, rng, mark_dir, raises=qualname == raising, taken=taken)
        if twin.source is None or twin.mark is None:
            reasons[qualname] = twin.reason
            continue
        # No line moves: what follows the first `before` lines is this function's wrapper,
        # the same text in every run's copy, holding every name it drew.
        taken += "\n" + "".join(pysource.lines(twin.source)[before:])
        source, marks[qualname] = twin.source, twin.mark
    return Marked(source, marks, reasons)
