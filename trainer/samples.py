"""A few sampled episodes of a training run, as text, for reading (`python -m evals.view RUN`).

Training keeps trajectories as token ids; nothing else of a run shows what the policy wrote.
`SampleWriter` appends, every `every` steps, up to `per_step` of the step's trajectories to
`RUN/samples.jsonl`, decoded turn by turn:

    {"step": 6, "trajectory_id": "...", "task_id": "...", "reward": 1.0, "resolved": true,
     "end": "finish", "patch": "diff --git ...", "turns": 2, "format_errors": 0, "staleness": 1,
     "reward_hack_blocked": ["protected_files"],   # the grading rules that fired
     "versions": [3, 4],                      # policy versions that sampled the episode
     "prompt": "...",                          # the prompt (system, tools, issue) as text
     "transcript": [                           # the turns, in evaluation runs' message shape
       {"role": "assistant", "content": "<tool_call>...", "tokens": 41, "versions": [3]},
       {"role": "tool", "content": "the observation"},
       {"role": "assistant", "content": "...", "tokens": 12, "versions": [3, 4],
        "spans": [[3, "text sampled by v3"], [4, "text sampled by v4"]]},   # mixed only
       ...]}

A turn's observation is the environment's answer as the policy saw it (the tool-response
wrapper of the chat template taken off); the last turn has none when the episode ended on
it (its observation was never appended to the tokens). The file is plain JSON lines, so
`evals` reads it without importing training.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from trainer.inference.trajectory import Trajectory

SAMPLES = "samples.jsonl"
_TOOL_RESPONSE = re.compile(r"<tool_response>\n?(.*?)\n?</tool_response>", re.DOTALL)


def pick(trajectories: Sequence[Trajectory], count: int) -> list[Trajectory]:
    """Up to `count` trajectories, in their order: the best and the worst reward first
    (so a step's sample shows a success and a failure when it has both), then the rest."""
    if len(trajectories) <= count:
        return list(trajectories)
    rewards = [t.reward for t in trajectories]
    first = [rewards.index(max(rewards)), rewards.index(min(rewards))]
    chosen = list(dict.fromkeys(first + list(range(len(trajectories)))))[:count]
    return [trajectories[i] for i in sorted(chosen)]


def _distinct(values: Sequence[int]) -> list[int]:
    return list(dict.fromkeys(values))


def _observation(text: str) -> str:
    found = _TOOL_RESPONSE.search(text)
    return found.group(1) if found else text.strip()


def sample_record(step: int, trajectory: Trajectory, decode: Callable[[list[int]], str]) -> dict:
    """One trajectory as a `samples.jsonl` record (see the module docstring)."""
    t = trajectory
    starts = list(t.turn_starts)
    transcript: list[dict] = []
    for n, start in enumerate(starts):
        following = starts[n + 1] if n + 1 < len(starts) else len(t.token_ids)
        end = start
        while end < following and t.policy_mask[end]:
            end += 1
        versions = t.versions[start:end]
        turn = {"role": "assistant", "content": decode(t.token_ids[start:end]), "tokens": end - start}
        turn["versions"] = _distinct(versions)
        if len(turn["versions"]) > 1:  # the weights changed mid-turn: which text came from which
            spans, run_start = [], start
            for i in range(start + 1, end + 1):
                if i == end or t.versions[i] != t.versions[run_start]:
                    spans.append([t.versions[run_start], decode(t.token_ids[run_start:i])])
                    run_start = i
            turn["spans"] = spans
        transcript.append(turn)
        if end < following:
            transcript.append({"role": "tool", "content": _observation(decode(t.token_ids[end:following]))})
    policy_versions = [v for v, policy in zip(t.versions, t.policy_mask, strict=False) if policy]
    return {
        "step": step,
        "trajectory_id": t.trajectory_id,
        "task_id": t.task_id,
        "reward": t.reward,
        "resolved": t.resolved,
        "end": t.end,
        "patch": t.patch,
        "turns": t.turns,
        "format_errors": t.format_errors,
        "staleness": t.staleness,
        "reward_hack_blocked": list(t.reward_hack_blocked),
        "versions": sorted(set(policy_versions)),
        "prompt": decode(t.token_ids[: starts[0] if starts else len(t.token_ids)]),
        "transcript": transcript,
    }


class SampleWriter:
    """Appends a few decoded trajectories of every `every`-th step to `run_dir/samples.jsonl`
    (`every` <= 0 writes nothing). Each line is flushed as written; a torn last line (a run
    killed mid-write) is cut off when the writer opens the file."""

    def __init__(self, run_dir: str | Path, every: int, *, per_step: int = 4) -> None:
        self.path = Path(run_dir) / SAMPLES
        self.every, self.per_step = every, per_step
        if self.path.exists():
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):
                self.path.write_bytes(data[: data.rfind(b"\n") + 1])

    def due(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    def write(self, step: int, trajectories: Sequence[Trajectory], decode: Callable[[list[int]], str]) -> int:
        """Append up to `per_step` of `trajectories` (see `pick`) when `step` is due; return
        how many were written."""
        if not self.due(step) or not trajectories:
            return 0
        lines = [json.dumps(sample_record(step, t, decode)) + "\n" for t in pick(trajectories, self.per_step)]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write("".join(lines))
            f.flush()
        return len(lines)

    def truncate(self, step: int) -> None:
        """Drop the samples of steps after `step` (a run resumed from the checkpoint of `step`
        samples those steps again)."""
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text().splitlines(keepends=True):
            try:
                if json.loads(line)["step"] <= step:
                    kept.append(line)
            except (ValueError, KeyError, TypeError):
                continue
        self.path.write_text("".join(kept))
