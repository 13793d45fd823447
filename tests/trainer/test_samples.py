"""`trainer.samples`: a step's trajectories, decoded turn by turn into `samples.jsonl`, with
real `Trajectory` objects built as the rollout builds them, with the shipped tiny tokenizer."""

import json
from pathlib import Path

import pytest

from trainer.inference.models import load_tokenizer
from trainer.inference.rollout import ChatFormat
from trainer.inference.trajectory import Trajectory
from trainer.samples import SAMPLES, SampleWriter, pick, sample_record

ACTION = '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "ls"}}\n</tool_call>'
OBSERVATION = "README.md\nsrc\n<b>not markup</b>"
FINISH = '<tool_call>\n{"name": "finish", "arguments": {}}\n</tool_call>'
PATCH = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n"


@pytest.fixture(scope="module")
def chat() -> ChatFormat:
    return ChatFormat(load_tokenizer("tiny"))


def make_trajectory(chat: ChatFormat, task_id: str = "t1", *, reward: float = 1.0, mixed: bool = True) -> Trajectory:
    """Two turns as `trainer.inference.rollout.turns.play_turn` appends them: the prompt, a
    reply sampled by version 3 ending on `<|im_end|>`, the observation, then a `finish` reply
    whose second half version 4 sampled (weights updated mid-turn) when `mixed`."""
    t = Trajectory(task_id=task_id, trajectory_id=f"job-{task_id}", staleness=1)
    t.extend(chat.prompt_ids("You are careful.", "<issue>\nfix it\n</issue>", None), policy=False)
    first = chat.encode(ACTION) + [chat.end_id]
    t.extend(first, policy=True, logprobs=[-0.5] * len(first), version=3)
    t.extend(chat.observation_ids(OBSERVATION, turn_closed=True), policy=False)
    second = chat.encode(FINISH) + [chat.end_id]
    t.extend(second, policy=True, logprobs=[-0.25] * len(second), version=3)
    if mixed:
        half = len(t) - len(second) // 2
        t.versions[half:] = [4] * (len(t) - half)
    t.reward, t.resolved, t.end, t.patch, t.turns, t.terminated = reward, reward > 0, "finish", PATCH, 2, True
    return t


def test_record_decodes_each_turn_its_observation_and_versions(chat):
    t = make_trajectory(chat)
    record = sample_record(7, t, chat.decode)
    first, observation, second = record["transcript"]
    assert first == {"role": "assistant", "content": ACTION, "tokens": len(chat.encode(ACTION)) + 1, "versions": [3]}
    assert observation == {"role": "tool", "content": OBSERVATION}  # the chat wrapper taken off
    assert second["content"] == FINISH and second["versions"] == [3, 4]  # the last turn has no observation
    assert [v for v, _ in second["spans"]] == [3, 4] and "".join(text for _, text in second["spans"]) == FINISH
    assert {k: record[k] for k in ("step", "trajectory_id", "task_id", "reward", "resolved", "end", "patch")} == {
        "step": 7,
        "trajectory_id": "job-t1",
        "task_id": "t1",
        "reward": 1.0,
        "resolved": True,
        "end": "finish",
        "patch": PATCH,
    }
    assert record["turns"] == 2 and record["staleness"] == 1 and record["versions"] == [3, 4]
    assert "You are careful." in record["prompt"] and "fix it" in record["prompt"]
    assert "spans" not in sample_record(7, make_trajectory(chat, mixed=False), chat.decode)["transcript"][2]


def test_writer_appends_every_nth_step_and_picks_best_and_worst(chat, tmp_path: Path):
    rewards = [0.5, 0.0, 0.5, 1.0, 0.5, 0.5]
    batch = [make_trajectory(chat, f"t{i}", reward=r) for i, r in enumerate(rewards)]
    assert [t.task_id for t in pick(batch, 3)] == ["t0", "t1", "t3"]  # the worst (t1), the best (t3), then in order
    writer = SampleWriter(tmp_path, every=2, per_step=3)
    assert writer.write(1, batch, chat.decode) == 0 and not (tmp_path / SAMPLES).exists()
    assert writer.write(2, batch, chat.decode) == 3
    assert writer.write(4, batch[:2], chat.decode) == 2
    assert writer.write(6, [], chat.decode) == 0
    lines = [json.loads(line) for line in (tmp_path / SAMPLES).read_text().splitlines()]
    assert [(r["step"], r["task_id"]) for r in lines] == [(2, "t0"), (2, "t1"), (2, "t3"), (4, "t0"), (4, "t1")]
    assert SampleWriter(tmp_path, every=0).write(2, batch, chat.decode) == 0  # 0: off


def test_resume_drops_later_steps_and_a_torn_line(chat, tmp_path: Path):
    writer = SampleWriter(tmp_path, every=1, per_step=1)
    for step in (1, 2, 3):
        writer.write(step, [make_trajectory(chat)], chat.decode)
    writer.truncate(2)  # resumed from the checkpoint of step 2
    path = tmp_path / SAMPLES
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2]
    path.write_text(path.read_text() + '{"step": 3, "tra')  # killed mid-write
    SampleWriter(tmp_path, every=1).write(3, [make_trajectory(chat)], chat.decode)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3]
