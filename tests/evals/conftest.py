import logging

import pytest


@pytest.fixture(autouse=True)
def _drop_console_handlers():
    """An entry point's `setup_logging()` binds a handler to the stderr of the moment (a
    test's capture): take it off after the test, so later tests do not log into a closed
    stream."""
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_agentic_rl", False)]:
        root.removeHandler(handler)
