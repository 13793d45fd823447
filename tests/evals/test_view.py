"""`evals.view`: the HTML page of a run's episodes, for a real evaluation run (a scripted agent
playing real turns in a local sandbox, then the gold patch) and a training run's
`samples.jsonl` (real `Trajectory` objects, the tiny tokenizer), loaded in headless Chromium
to check what a person would see, and that model output containing `<script>` never runs."""

import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent_env import format_tool_call, gold_actions
from agent_env.tools import ToolCall
from evals.config import EvalConfig
from evals.runner import Attempt, RecordingEnv
from evals.swe import evaluate
from evals.view import load_run, main, write_page
from tasks import Task, builtin_tasks
from tests.conftest import needs_bwrap

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install -y chromium)"
)
TITLE_ATTACK = '<script>document.title="PWNED";document.body.innerHTML="PWNED"</script>'
IMG_ATTACK = '<img src=x onerror="document.title=1">'  # echoed by the sandbox: an observation
TASKS = [t.id for t in builtin_tasks()[:2]]


class ScriptedAgent:
    """A stand-in for the model: its first reply carries markup around a real tool call (the
    sandbox computes `42-from-the-sandbox`, which no action contains), then it plays the
    task's gold actions (the change, then `finish`), so the env grades a real diff."""

    name = "scripted"
    needs_workspace = True

    def __call__(self, task: Task, index: int, *, grade: bool) -> Attempt:
        env = RecordingEnv(task)
        command = f"echo $((6*7))-from-the-sandbox; echo '{IMG_ATTACK}'"
        actions = [f"{TITLE_ATTACK}\n{format_tool_call(ToolCall('execute_bash', {'command': command}))}"]
        try:
            env.reset(seed=index)
            for action in actions + gold_actions(task):
                _, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
        finally:
            env.close()
        return Attempt(
            patch=info.get("patch", ""), grade=env.grade, transcript=env.transcript, turns=env.stats.turns, end="finish"
        )


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("eval-run")
    evaluate(EvalConfig(model="scripted", dataset="builtin", instances=TASKS, output=output), solver=ScriptedAgent())
    return output


@pytest.fixture(scope="module")
def train_run(tmp_path_factory) -> Path:
    from tests.trainer.test_samples import make_trajectory
    from trainer.inference.models import load_tokenizer
    from trainer.inference.rollout import ChatFormat
    from trainer.samples import SampleWriter

    chat = ChatFormat(load_tokenizer("tiny"))
    run = tmp_path_factory.mktemp("train-run")
    writer = SampleWriter(run, every=2, per_step=2)
    writer.write(
        2, [make_trajectory(chat, "task-good", reward=1.0), make_trajectory(chat, "task-bad", reward=0.0)], chat.decode
    )
    attack = make_trajectory(chat, "task-attack", reward=0.0, mixed=False)
    first = attack.turn_starts[0]  # the first reply, replaced by markup the policy might write
    ids = chat.encode(TITLE_ATTACK) + [chat.end_id]
    stop = attack.policy_mask.index(False, first)
    attack.token_ids[first:stop] = ids
    attack.policy_mask[first:stop], attack.logprobs[first:stop] = [True] * len(ids), [-1.0] * len(ids)
    attack.versions[first:stop] = [5] * len(ids)
    attack.turn_starts[1] += len(ids) - (stop - first)
    writer.write(4, [attack], chat.decode)
    return run


class Visible(HTMLParser):
    """The text of a page as a reader gets it: its title, its text outside <style> and
    <script>, and the elements it has."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.title, self.text, self.tags, self._stack = "", [], [], []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._stack.append(tag)

    def handle_endtag(self, tag):
        while self._stack and self._stack.pop() != tag:
            pass

    def handle_data(self, data):
        where = self._stack[-1] if self._stack else ""
        if where == "title":
            self.title += data
        elif where not in ("style", "script"):
            self.text.append(data)


def rendered(page: Path, tmp_path: Path) -> Visible:
    """The DOM headless Chromium built after loading `page` (its scripts, had any run)."""
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
         "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0 and "<body" in result.stdout, result.stderr[-2000:]
    return Visible(result.stdout)


# -- without a browser ---------------------------------------------------------------------------


@needs_bwrap
def test_eval_run_page_escapes_model_output(eval_run: Path, tmp_path: Path):
    kind, info, episodes = load_run(eval_run)
    assert kind == "evaluation" and info["model"] == "scripted"
    assert [ep.task_id for ep in episodes] == TASKS and all(ep.resolved for ep in episodes)
    assert all(ep.transcript[2]["content"].startswith(TITLE_ATTACK) for ep in episodes)  # the real transcript
    page = write_page(eval_run, tmp_path / "page.html").read_text()
    assert "<script" not in page and "<img" not in page  # every piece of model output is escaped
    assert "&lt;script&gt;document.title=&quot;PWNED&quot;" in page and "42-from-the-sandbox" in page


def test_command_line_errors_are_one_line(tmp_path: Path, capsys):
    assert main([str(tmp_path / "missing")]) == 2
    assert main([str(tmp_path)]) == 2  # an empty folder
    (tmp_path / "results.jsonl").write_text("")
    assert main([str(tmp_path)]) == 2  # a run that has not finished an episode
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"error: {tmp_path / 'missing'}: no such run folder",
        f"error: {tmp_path}: not a run folder (no results.jsonl, trajectories/ or samples.jsonl)",
        f"error: {tmp_path}: the run has no episodes yet",
    ]
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "example: python -m evals.view runs/eval-swe" in capsys.readouterr().out


# -- in headless Chromium ------------------------------------------------------------------------


@needs_bwrap
@needs_chromium
def test_eval_run_in_a_browser(eval_run: Path, tmp_path: Path):
    assert main([str(eval_run)]) == 0
    page = rendered(eval_run / "view.html", tmp_path)
    text = "".join(page.text)
    assert page.title == f"{eval_run.name}: evaluation episodes"  # no script changed it
    assert "script" not in page.tags and "img" not in page.tags
    assert TITLE_ATTACK in text and IMG_ATTACK in text  # shown as text, as the model wrote it
    tasks = {t.id: t for t in builtin_tasks()[:2]}
    for task_id, task in tasks.items():
        assert text.count(task_id) >= 2  # the index and the episode's heading
        added = next(line for line in task.gold_patch.splitlines() if line.startswith("+") and len(line) > 3)
        assert added in text  # the final diff
    assert "42-from-the-sandbox" in text  # an observation
    assert "execute_bash" in text and "finish" in text  # the parsed tool calls
    assert "resolved" in text and "ended by" in text


@needs_chromium
def test_training_samples_in_a_browser(train_run: Path, tmp_path: Path):
    started = time.monotonic()
    assert main([str(train_run), "--output", str(tmp_path / "train.html")]) == 0
    assert time.monotonic() - started < 30
    page = rendered(tmp_path / "train.html", tmp_path)
    text = "".join(page.text)
    assert page.title == f"{train_run.name}: training episodes"
    assert "script" not in page.tags and TITLE_ATTACK in text
    for task_id in ("task-good", "task-bad", "task-attack"):
        assert task_id in text
    assert "step 2 · task-good" in text and "step 4 · task-attack" in text
    assert "policy v3" in text and "policy v4" in text and "policy v5" in text  # the version legend and badges
    assert "reward1" in text and "reward0" in text  # the facts table: reward, then its value
    assert "<b>not markup</b>" in text  # the observation, as text
    assert "+new" in text  # the final diff


def test_the_grading_rules_that_fired_are_shown_per_episode_and_in_the_index(tmp_path: Path):
    from tests.trainer.test_samples import make_trajectory
    from trainer.inference.models import load_tokenizer
    from trainer.inference.rollout import ChatFormat
    from trainer.samples import SampleWriter

    chat = ChatFormat(load_tokenizer("tiny"))
    hacked = make_trajectory(chat, "task-hacked", reward=0.0)
    hacked.reward_hack_blocked = ["canary_passed", "outside_allowlist"]
    SampleWriter(tmp_path, every=1, per_step=2).write(
        1, [make_trajectory(chat, "task-fine", reward=1.0), hacked], chat.decode
    )
    _, _, episodes = load_run(tmp_path)
    assert [(ep.task_id, ep.blocked) for ep in episodes] == [
        ("task-fine", []),
        ("task-hacked", ["canary_passed", "outside_allowlist"]),
    ]
    text = " ".join(Visible(write_page(tmp_path, tmp_path / "page.html").read_text()).text)
    assert "rules fired" in text and "grading rules fired" in text
    assert text.count("canary_passed, outside_allowlist") == 2  # the index row and the episode's facts
