import json
from pathlib import Path


def _totals():
    return json.loads(Path("/app/totals.json").read_text())


def test_north():
    assert round(_totals()["north"], 2) == 15.0


def test_south():
    assert round(_totals()["south"], 2) == 4.0


def test_east():
    assert round(_totals()["east"], 2) == 9.9


def test_west():
    assert round(_totals()["west"], 2) == 1.1
