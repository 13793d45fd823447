"""bench.perf.rollout end to end at a tiny size: every method plays the same episodes."""

import json
import sys

from bench.perf import rollout
from tests.conftest import needs_bwrap


@needs_bwrap
def test_every_method_plays_token_identical_episodes(tmp_path, monkeypatch):
    for name, value in (("EPISODES", 3), ("TURNS", 2), ("MAX_NEW_TOKENS", 4), ("REPEATS", 1)):
        monkeypatch.setattr(rollout, name, value)
    monkeypatch.setattr(sys, "argv", ["bench.perf.rollout", "--json", str(tmp_path / "rollout.json")])
    rollout.main()
    figures = json.loads((tmp_path / "rollout.json").read_text())
    assert figures["generated_tokens"] == 3 * 2 * 4
    for name in ("generate", "slots", "lockstep"):
        assert figures[f"identical_episodes_{name}"] == 3, name
    assert 1.0 <= figures["slots_mean_batch"] <= 3.0
