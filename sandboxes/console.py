"""The one logging configuration every command-line entry point uses.

Library code logs through `logging.getLogger(__name__)` and never prints; an entry point
(`python -m trainer.train`, `evals.swe`, `tasks`, `sandboxes`, `bench.*`) calls
`setup_logging()` once, first thing. It lives in the lowest layer so every layer's entry
point can share it.

User-facing output stays concise: INFO lines are the bare message, as a print would be;
warnings and errors carry their level; `AGENTIC_RL_LOG=debug` (or `verbose=True`) shows
debug lines with the logger's name. Progress bars (tqdm) write to stderr beside it.
"""

from __future__ import annotations

import logging
import os
import sys


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {message}"
        if record.levelno < logging.INFO:
            return f"[{record.name}] {message}"
        return message


def setup_logging(verbose: bool = False) -> None:
    """Send log records of this project (and warnings of others) to stderr, one line each."""
    debug = verbose or os.environ.get("AGENTIC_RL_LOG", "").lower() == "debug"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Format("%(message)s"))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_agentic_rl", False)]:
        root.removeHandler(old)
    handler._agentic_rl = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    for name in ("agent_env", "sandboxes", "tasks", "trainer", "evals", "bench", "__main__"):
        logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.INFO)
