"""Shared fixtures. Sandbox tests need bubblewrap; without it they are skipped with the reason."""

from __future__ import annotations

import pytest

from sandboxes.local import bwrap_available

BWRAP_PROBLEM = bwrap_available()
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"local sandbox unavailable: {BWRAP_PROBLEM}")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # Prepared task workspaces are cached by content; one cache per test session.
    monkeypatch.setenv("AGENTIC_RL_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
