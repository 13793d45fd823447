"""Write one static HTML page of a run's episodes, to read what the agent did.

    python -m evals.view runs/eval-swe                   # -> runs/eval-swe/view.html
    python -m evals.view runs/train-swe --output /tmp/train.html

RUN is an evaluation run folder (`python -m evals.swe`: `results.jsonl`, `trajectories/`) or a
training run folder with `samples.jsonl` (`trainer.samples.SampleWriter`). Per episode the page
shows the task id, the reward (where recorded), resolved, the status and how the episode ended,
then every turn: the model's action text, the tool call parsed from it, the observation (long
texts folded), and the final diff. Turns of a training run are coloured and labelled by the
policy version that sampled them (text spans too, when the weights changed mid-turn).

The page is self-contained (no script, no network: its Content-Security-Policy forbids both)
and everything in it is HTML-escaped: model output is shown as text, never run.
"""

from __future__ import annotations

import argparse
import html
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_env import TOOL_SCHEMAS, ToolCallError, parse_tool_calls
from evals.store import RESULTS, RUN_INFO, TRAJECTORIES, RunFileError, latest_by_instance, read_jsonl
from sandboxes.console import setup_logging

log = logging.getLogger(__name__)

SAMPLES = "samples.jsonl"  # written by trainer.samples.SampleWriter (same name there)
FOLD_LINES, FOLD_CHARS = 16, 1500
"""Texts longer than this are folded (a <details> element showing their first line)."""
DIFF_FOLD_SCALE = 25
"""Diffs fold only past this many times those limits."""
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


class ViewError(ValueError):
    """The run folder cannot be shown; the message is one line."""


@dataclass
class Episode:
    task_id: str
    status: str
    resolved: bool
    end: str | None
    patch: str
    transcript: list[dict] = field(default_factory=list)
    reward: float | None = None
    step: int | None = None
    versions: list[int] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    """Other fields worth a line (turns, tokens, error, failed tests, ...)."""
    prompt: str = ""
    blocked: list[str] = field(default_factory=list)
    """The grading rules that fired (`reward_hack_blocked`): what a reward hack ran into."""


# -- reading runs ------------------------------------------------------------------------------


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ViewError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ViewError(f"{path}: expected a JSON object")
    return data


def _present(facts: dict) -> dict:
    return {k: v for k, v in facts.items() if v not in (None, "", [])}


def _eval_episodes(run: Path) -> list[Episode]:
    records = latest_by_instance(read_jsonl(run / RESULTS))
    folder = run / TRAJECTORIES
    files = {p.name: p for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}
    episodes = []
    for instance, record in records.items():
        name = Path(str(record.get("trajectory") or "")).name
        data = _read_json(files.pop(name)) if name in files else {}
        episodes.append(_eval_episode({**data, **record, "instance_id": instance}, data.get("transcript", [])))
    for path in files.values():  # a trajectory whose record is not (yet) in results.jsonl
        data = _read_json(path)
        episodes.append(_eval_episode(data, data.get("transcript", [])))
    return episodes


def _eval_episode(data: dict, transcript: list[dict]) -> Episode:
    facts = {k: data.get(k) for k in ("model", "grader", "turns", "tokens", "policy_tokens", "seconds")}
    for key in ("error", "note", "unavailable", "failed_tests", "missing_tests"):
        if data.get(key):
            facts[key] = data[key]
    return Episode(
        task_id=str(data.get("instance_id", "?")),
        status=str(data.get("status", "?")),
        resolved=bool(data.get("resolved")),
        end=data.get("end"),
        patch=data.get("patch") or "",
        transcript=list(transcript),
        facts=_present(facts),
        blocked=[str(rule) for rule in data.get("reward_hack_blocked") or []],
    )


def _training_episodes(path: Path) -> list[Episode]:
    episodes = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            step = int(data["step"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            log.warning("%s:%d: skipping a line that is not a sample (%s)", path, number, exc)
            continue
        resolved = bool(data.get("resolved"))
        facts = {k: data.get(k) for k in ("trajectory_id", "turns", "format_errors", "staleness")}
        episodes.append(
            Episode(
                task_id=str(data.get("task_id", "?")),
                status="resolved" if resolved else "unresolved",
                resolved=resolved,
                end=data.get("end"),
                patch=data.get("patch") or "",
                transcript=list(data.get("transcript") or []),
                reward=data.get("reward"),
                step=step,
                versions=list(data.get("versions") or []),
                prompt=data.get("prompt") or "",
                facts=_present(facts),
                blocked=[str(rule) for rule in data.get("reward_hack_blocked") or []],
            )
        )
    return episodes


def load_run(run: Path) -> tuple[str, dict, list[Episode]]:
    """The run's kind (`evaluation` or `training`), its settings and its episodes."""
    run = Path(run)
    if not run.is_dir():
        raise ViewError(f"{run}: no such run folder")
    if (run / SAMPLES).exists():
        kind, info, episodes = "training", {}, _training_episodes(run / SAMPLES)
    elif (run / RESULTS).exists() or (run / TRAJECTORIES).is_dir():
        try:
            info = _read_json(run / RUN_INFO) if (run / RUN_INFO).exists() else {}
            kind, episodes = "evaluation", _eval_episodes(run)
        except RunFileError as exc:
            raise ViewError(str(exc)) from None
    else:
        raise ViewError(f"{run}: not a run folder (no {RESULTS}, {TRAJECTORIES}/ or {SAMPLES})")
    if not episodes:
        raise ViewError(f"{run}: the run has no episodes yet")
    return kind, info, episodes


# -- rendering ---------------------------------------------------------------------------------


def e(value: Any) -> str:
    """Everything on the page goes through here (or `_text`)."""
    return html.escape(str(value), quote=True)


def _text(text: str, css: str = "") -> str:
    """A block of text, folded when long (a diff only when very long: it is what was graded)."""
    text = str(text)
    block = f'<pre class="{css}">{_diff_lines(text) if css == "diff" else e(text)}</pre>'
    lines, scale = text.count("\n") + 1, DIFF_FOLD_SCALE if css == "diff" else 1
    if lines <= FOLD_LINES * scale and len(text) <= FOLD_CHARS * scale:
        return block
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = first[:120] + ("…" if len(first) > 120 else "")
    return f"<details><summary>{e(first)} <span class=muted>({lines} lines, {len(text)} chars)</span></summary>{block}</details>"


def _diff_lines(patch: str) -> str:
    out = []
    kinds = (("diff --git", "file"), ("+++", "file"), ("---", "file"), ("+", "add"), ("-", "del"), ("@@", "hunk"))
    for line in patch.splitlines():
        css = next((kind for prefix, kind in kinds if line.startswith(prefix)), "")
        out.append(f'<span class="{css}">{e(line)}</span>' if css else e(line))
    return "\n".join(out)


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, dict):  # an OpenAI-style message: its text, then its tool calls
        calls = content.get("tool_calls")
        return (content.get("content") or "") + (f"\n[tool_calls] {json.dumps(calls)}" if calls else "")
    return "" if content is None else str(content)


def _tool_call(message: dict) -> str:
    action = message.get("content")
    try:
        calls = parse_tool_calls(action if isinstance(action, dict) else str(action or ""), list(TOOL_SCHEMAS))
    except ToolCallError as exc:
        return f'<div class="call bad">no tool call parsed: {e(exc)}</div>'
    parts = []
    for call in calls:  # each argument as text (a command's newlines as lines, not `\n`)
        arguments = "".join(
            f'<div class="arg">{e(key)}</div>{_text(value if isinstance(value, str) else json.dumps(value))}'
            for key, value in call.arguments.items()
        )
        parts.append(f'<div class="call"><b>{e(call.name)}</b>{arguments}</div>')
    return "".join(parts)


def _colour(version: int, versions: list[int]) -> str:
    return PALETTE[versions.index(version) % len(PALETTE)] if version in versions else "#888"


def _badge(version: int, versions: list[int]) -> str:
    return f'<span class="badge" style="background:{_colour(version, versions)}">policy v{e(version)}</span>'


def _turns(episode: Episode, versions: list[int]) -> str:
    out, turn = [], 0
    messages = episode.transcript
    for i, message in enumerate(messages):
        role = message.get("role")
        if role in ("system", "user"):
            out.append(f'<div class="context"><h4>{e(role)}</h4>{_text(_content(message))}</div>')
            continue
        if role != "assistant":
            continue
        turn += 1
        mine = [v for v in message.get("versions") or [] if isinstance(v, int)]
        colour = _colour(mine[-1], versions) if mine else "#bbb"
        badges = " ".join(_badge(v, versions) for v in mine)
        tokens = f' <span class="muted">{e(message["tokens"])} tokens</span>' if "tokens" in message else ""
        if message.get("spans"):
            spans = "".join(
                f'<span class="span" style="border-bottom:3px solid {_colour(v, versions)}" title="policy v{e(v)}">{e(t)}</span>'
                for v, t in message["spans"]
            )
            action = f"<pre>{spans}</pre>"
        else:
            action = _text(_content(message))
        following = messages[i + 1] if i + 1 < len(messages) else None
        if following is not None and following.get("role") == "tool":
            answer = _content(following)
            observation = _text(answer) if answer.strip() else '<p class="muted">(empty)</p>'
        else:
            observation = '<p class="muted">(no observation: the episode ended on this turn)</p>'
        out.append(
            f'<div class="turn" style="border-left-color:{colour}"><h4>turn {turn} {badges}{tokens}</h4>'
            f'<div class="label">action</div>{action}<div class="label">tool call</div>{_tool_call(message)}'
            f'<div class="label">observation</div>{observation}</div>'
        )
    return "".join(out) or '<p class="muted">(no turns recorded: an oracle or a predictions file made this patch)</p>'


def _reward(episode: Episode) -> str:
    reward = episode.reward
    return "—" if reward is None else f"{reward:g}" if isinstance(reward, (int, float)) else str(reward)


def _facts(episode: Episode) -> str:
    rows = [("status", episode.status), ("resolved", "yes" if episode.resolved else "no")]
    if episode.reward is not None:
        rows.insert(0, ("reward", _reward(episode)))
    rows.append(("ended by", episode.end or "—"))
    if episode.blocked:
        rows.append(("grading rules fired", ", ".join(episode.blocked)))
    if episode.versions:
        rows.append(("policy versions", ", ".join(str(v) for v in episode.versions)))
    rows += [(k, json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in episode.facts.items()]
    return "<table class=facts>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows) + "</table>"


def _episode(n: int, episode: Episode, versions: list[int]) -> str:
    step = f"step {e(episode.step)} · " if episode.step is not None else ""
    prompt = f'<div class="context"><h4>prompt</h4>{_text(episode.prompt)}</div>' if episode.prompt else ""
    diff = _text(episode.patch, "diff") if episode.patch.strip() else '<p class="muted">(no diff)</p>'
    return (
        f'<details class="episode {e(episode.status)}" id="episode-{n}" open><summary><h2>{step}{e(episode.task_id)} '
        f'<span class="status">{e(episode.status)}</span></h2></summary>{_facts(episode)}{prompt}'
        f"{_turns(episode, versions)}<h3>final diff</h3>{diff}</details>"
    )


def _index(episodes: list[Episode]) -> str:
    training = any(ep.step is not None for ep in episodes)
    rewards = any(ep.reward is not None for ep in episodes)
    blocked = any(ep.blocked for ep in episodes)
    columns = (
        (["step"] if training else [])
        + ["task"]
        + (["reward"] if rewards else [])
        + ["status", "ended by", "turns"]
        + (["rules fired"] if blocked else [])
    )
    head = "".join(f"<th>{c}</th>" for c in columns)
    rows = []
    for n, ep in enumerate(episodes):
        turns = sum(1 for m in ep.transcript if m.get("role") == "assistant") or ep.facts.get("turns", 0)
        cells = ([e(ep.step)] if training else []) + [f'<a href="#episode-{n}">{e(ep.task_id)}</a>']
        cells += ([e(_reward(ep))] if rewards else []) + [e(ep.status), e(ep.end or "—"), e(turns)]
        cells += [e(", ".join(ep.blocked) or "—")] if blocked else []
        rows.append(f'<tr class="{e(ep.status)}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table class=index><tr>{head}</tr>{''.join(rows)}</table>"


STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:.5em;margin:.2em 0;font:12px/1.35 monospace}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
.episode{border:1px solid #ccc;border-radius:6px;padding:.3em 1em;margin:1em 0}
.episode>summary h2{display:inline;font-size:1.1em}.status{font-weight:normal;color:#555}
tr.resolved td,.resolved>summary .status{color:#1a7f37}tr.error td{color:#b35900}
.turn{border-left:6px solid #bbb;padding-left:.8em;margin:.8em 0}.turn h4,.context h4{margin:.3em 0}
.label{font-size:11px;text-transform:uppercase;color:#777;margin-top:.3em}
.call{margin:.2em 0}.arg{font:11px monospace;color:#555}.call.bad{color:#b00}.muted{color:#888;font-weight:normal}
.badge{color:#fff;border-radius:3px;padding:0 5px;font-size:11px;font-weight:normal}
.diff .add{color:#1a7f37}.diff .del{color:#cf222e}.diff .hunk{color:#0969da}.diff .file{font-weight:bold}
"""


def render(kind: str, info: dict, episodes: list[Episode], title: str) -> str:
    """The page, as one HTML string."""
    versions = sorted({v for ep in episodes for v in ep.versions})
    resolved = sum(ep.resolved for ep in episodes)
    settings = ", ".join(f"{k}: {v}" for k, v in info.items() if isinstance(v, (str, int, float, bool)))
    legend = "<p>policy versions: " + " ".join(_badge(v, versions) for v in versions) + "</p>" if versions else ""
    return (
        "<!DOCTYPE html><html><head><meta charset=utf-8>"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{e(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{e(title)}</h1><p>{e(kind)} run · {len(episodes)} episodes · {resolved} resolved"
        + (f" · {e(settings)}" if settings else "")
        + f"</p>{legend}{_index(episodes)}"
        + "".join(_episode(n, ep, versions) for n, ep in enumerate(episodes))
        + "</body></html>\n"
    )


def write_page(run: Path, output: Path | None = None) -> Path:
    """Write the page of `run` to `output` (default `run/view.html`); return its path."""
    kind, info, episodes = load_run(run)
    output = Path(output) if output is not None else Path(run) / "view.html"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render(kind, info, episodes, f"{Path(run).resolve().name}: {kind} episodes"), encoding="utf-8")
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.view",
        description=__doc__.split("\n")[0] + " Works for an evaluation run folder (results.jsonl, trajectories/) "
        "and a training run folder (samples.jsonl).",
        epilog="example: python -m evals.view runs/eval-swe --output /tmp/eval.html  (then open it in a browser)",
    )
    parser.add_argument("run", type=Path, help="the run folder")
    parser.add_argument("--output", type=Path, default=None, help="the HTML file to write (default: RUN/view.html)")
    args = parser.parse_args(argv)
    setup_logging()
    try:
        path = write_page(args.run, args.output)
    except ViewError as exc:
        log.error("%s", exc)
        return 2
    print(path)  # the command's result
    return 0


if __name__ == "__main__":
    sys.exit(main())
