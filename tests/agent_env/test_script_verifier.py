"""`agent_env.grading.script_verifier`'s parts: the reward file as Harbor reads it (and what it
refuses to read), the scalar reward, and the canary twins of a verifier's tests folder. The
whole grading, attacked through the agent's tools: test_harbor_hacks.py."""

import math
import os
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_env.grading.script_verifier import (
    MAX_REWARD_BYTES,
    build_test_twins,
    find_test_functions,
    read_reward,
    reward_path_twin,
    scalar,
)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"reward.txt": "1\n"}, {"reward": 1.0}),
        ({"reward.txt": " 0.25 "}, {"reward": 0.25}),
        ({"reward.json": '{"reward": 1, "style": 0.5}'}, {"reward": 1.0, "style": 0.5}),
        ({"reward.json": '{"passed": true, "fast": false}'}, {"passed": 1.0, "fast": 0.0}),
        ({"reward.txt": "0", "reward.json": '{"reward": 0.75}'}, {"reward": 0.75}),  # reward.json first
        ({}, "the verifier left no reward file (reward.txt or reward.json in /logs/verifier)"),
        ({"reward.txt": ""}, "reward.txt does not hold one number ('')"),
        ({"reward.txt": "nan"}, "reward.txt is not a finite number"),
        ({"reward.txt": "1 2"}, "reward.txt does not hold one number ('1 2')"),
        ({"reward.json": "[1]"}, "reward.json must be a non-empty object of names to numbers"),
        ({"reward.json": "{}"}, "reward.json must be a non-empty object of names to numbers"),
        ({"reward.json": '{"reward": "1"}'}, "reward.json: 'reward' is not a finite number"),
        ({"reward.json": '{"reward": {"x": 1}}'}, "reward.json: 'reward' is not a finite number"),
        ({"reward.json": '{"reward": Infinity}'}, "reward.json: 'reward' is not a finite number"),
    ],
)
def test_the_reward_file_is_read_as_harbor_reads_it(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert read_reward(tmp_path) == expected


def test_a_reward_file_that_is_not_a_plain_small_file_is_not_read(tmp_path):
    (tmp_path / "one").write_text("1")
    (tmp_path / "reward.txt").symlink_to(tmp_path / "one")
    assert (
        read_reward(tmp_path)
        == "reward.txt cannot be read (Too many levels of symbolic links; a symlink is not followed)"
    )
    (tmp_path / "reward.txt").unlink()
    os.mkfifo(tmp_path / "reward.txt")  # a reader would block on it forever
    assert read_reward(tmp_path) == "reward.txt is not a regular file"
    (tmp_path / "reward.txt").unlink()
    (tmp_path / "reward.txt").write_text("1" + " " * MAX_REWARD_BYTES)
    assert read_reward(tmp_path) == f"reward.txt is over {MAX_REWARD_BYTES} bytes"


@given(st.binary(max_size=300))
def test_any_bytes_in_a_reward_file_give_numbers_or_a_reason_never_an_exception(data):
    import tempfile
    from pathlib import Path

    for name in ("reward.txt", "reward.json"):
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / name).write_bytes(data)
            got = read_reward(Path(folder))
            assert isinstance(got, str) or all(math.isfinite(v) for v in got.values())


def test_the_scalar_is_the_reward_key_else_the_mean():
    assert scalar({"reward": 0.5, "style": 1.0}) == 0.5
    assert scalar({"a": 1.0, "b": 0.0}) == 0.5
    assert scalar({}) == 0.0


SOURCE = """
import unittest

def helper():
    return 1

def test_top():
    assert helper() == 1

class TestThing:
    def test_method(self):
        assert [1, 2] == [1, 2]

    def not_a_test(self):
        pass

class Case(unittest.TestCase):
    def test_case(self):
        self.assertEqual(helper(), 1)

    def test_no_assertion(self):
        helper()
"""


def test_test_functions_are_found_at_the_top_and_in_classes():
    assert find_test_functions(SOURCE) == [
        "test_top",
        "TestThing.test_method",
        "Case.test_case",
        "Case.test_no_assertion",
    ]
    assert find_test_functions("def broken(:\n") == []


def test_each_test_gets_a_tail_and_an_expectation_twin_of_its_own(tmp_path):
    (tmp_path / "test_things.py").write_text(SOURCE)
    (tmp_path / "helper.py").write_text("def test_not_in_a_test_file(): pass\n")
    twins, notes = build_test_twins(tmp_path, random.Random(0))
    assert sorted((t.kind, t.test) for t in twins) == [
        ("expectation", "test_things.py::Case.test_case"),
        ("expectation", "test_things.py::TestThing.test_method"),
        ("expectation", "test_things.py::test_top"),
        ("tail", "test_things.py::Case.test_case"),
        ("tail", "test_things.py::Case.test_no_assertion"),
        ("tail", "test_things.py::TestThing.test_method"),
        ("tail", "test_things.py::test_top"),
    ]
    assert all(list(t.files) == ["test_things.py"] and t.files["test_things.py"] != SOURCE for t in twins)
    assert notes == [
        "test_things.py::Case.test_no_assertion: no negation canary: test_no_assertion has no assertion in its body"
    ]
    (tmp_path / "none").mkdir()
    empty, notes = build_test_twins(tmp_path / "none", random.Random(0))
    assert empty == [] and notes == ["no test canary: the verifier has no Python test function to build a twin of"]


def test_the_reward_path_twin_moves_every_mention_of_the_reward_folder(tmp_path):
    (tmp_path / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (tmp_path / "score.py").write_text("open('/logs/verifier/reward.json', 'w')\n")
    (tmp_path / "data.bin").write_bytes(b"\xff\xfe/logs/verifier")
    twin = reward_path_twin(tmp_path, random.Random(3))
    assert twin is not None and twin.kind == "reward_path" and twin.reward_dir.startswith("/logs/")
    assert twin.reward_dir != "/logs/verifier" and sorted(twin.files) == ["score.py", "test.sh"]
    assert twin.files["test.sh"] == f"#!/bin/bash\necho 1 > {twin.reward_dir}/reward.txt\n"
    (tmp_path / "test.sh").write_text("#!/bin/bash\necho 1 > $OUT\n")
    (tmp_path / "score.py").unlink()
    assert reward_path_twin(tmp_path, random.Random(3)) is None
