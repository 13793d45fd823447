"""`make eval-swe`: run an agent on SWE tasks, write official predictions, grade, report.

    python -m evals.swe [--model tiny|PATH|gold|empty] [--dataset builtin|PATH.jsonl|verified]
                        [--instances ID,ID] [--output DIR]

Writes, in `--output`:
- `predictions.jsonl`: SWE-bench's format (`instance_id`, `model_name_or_path`, `model_patch`);
- `results.jsonl`: one line per instance: status (resolved / unresolved / error /
  empty_patch), turns, tokens, failing tests, the error message;
- `report.json` and `report.md`: the counts. Errors are infrastructure failures (no
  environment, a dead sandbox, a test run that timed out) and are never counted as
  unresolved: the resolved rate is over graded instances and over all instances, both shown.

A rerun with the same `--output` skips instances already in `results.jsonl` (resumable).
`--model gold` submits each task's gold patch and `--model empty` an empty patch: oracle
runs that check the grading itself.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from tqdm import tqdm

from agent_env import GradingError, ToolEnv, grade_patch
from sandboxes import SandboxError
from tasks import Task, load_task_set

ORACLES = ("gold", "empty")


def _oracle_result(task: Task, model: str) -> dict:
    patch = task.gold_patch if model == "gold" else ""
    grade = grade_patch(task, patch)
    return {"patch": patch, "resolved": grade.resolved, "failed_tests": list(grade.failed), "turns": 0, "tokens": 0}


class AgentRunner:
    """Runs the policy on one task at a time with the `hf` engine."""

    def __init__(
        self,
        model: str,
        *,
        engine: str,
        base_url: str | None,
        tokenizer: str | None,
        max_turns: int,
        max_new_tokens: int,
        max_total_tokens: int,
        temperature: float,
        seed: int,
    ) -> None:
        from trainer.engines import make_engine
        from trainer.models import load_tokenizer
        from trainer.rollout import ChatFormat

        self.chat = ChatFormat(load_tokenizer(tokenizer or model))
        self.engine = make_engine(engine, model, seed=seed, base_url=base_url)
        self.max_turns, self.max_new_tokens, self.max_total_tokens = max_turns, max_new_tokens, max_total_tokens
        self.temperature, self.seed = temperature, seed

    def __call__(self, task: Task, index: int) -> dict:
        from trainer.rollout import run_episode

        env = ToolEnv(task, max_turns=min(self.max_turns, task.limits.max_turns))
        trajectory = run_episode(
            env,
            self.engine,
            self.chat,
            max_new_tokens=self.max_new_tokens,
            max_total_tokens=self.max_total_tokens,
            temperature=self.temperature,
            seed=self.seed + index,
        )
        return {
            "patch": trajectory.info["patch"],
            "resolved": trajectory.info["resolved"],
            "turns": trajectory.info["turns"],
            "tokens": len(trajectory),
            "end": trajectory.info["end"],
        }


def status_of(result: dict) -> str:
    if result.get("error"):
        return "error"
    if not result.get("patch", "").strip():
        return "empty_patch"
    return "resolved" if result["resolved"] else "unresolved"


def summarize(results: list[dict]) -> dict:
    """Counts by status; rates over all instances and over graded ones (errors excluded)."""
    counts = Counter(r["status"] for r in results)
    total = len(results)
    graded = total - counts["error"]
    return {
        "instances": total,
        "resolved": counts["resolved"],
        "unresolved": counts["unresolved"],
        "empty_patch": counts["empty_patch"],
        "error": counts["error"],
        "resolved_rate": counts["resolved"] / total if total else 0.0,
        "resolved_rate_of_graded": counts["resolved"] / graded if graded else 0.0,
    }


def markdown_report(summary: dict, results: list[dict], model: str) -> str:
    lines = [
        f"# SWE evaluation: {model}",
        "",
        "| instances | resolved | unresolved | empty patch | error | resolved % | resolved % of graded |",
        "|---|---|---|---|---|---|---|",
        f"| {summary['instances']} | {summary['resolved']} | {summary['unresolved']} | {summary['empty_patch']} "
        f"| {summary['error']} | {100 * summary['resolved_rate']:.1f} | {100 * summary['resolved_rate_of_graded']:.1f} |",
        "",
        "| instance | status | turns | note |",
        "|---|---|---|---|",
    ]
    for r in results:
        note = (r.get("error") or "").replace("|", "/").replace("\n", " ")[:120]
        lines.append(f"| {r['instance_id']} | {r['status']} | {r.get('turns', 0)} | {note} |")
    return "\n".join(lines) + "\n"


def evaluate(
    *,
    model: str,
    dataset: str,
    output: Path,
    instances: list[str] | None = None,
    engine: str = "hf",
    base_url: str | None = None,
    tokenizer: str | None = None,
    max_turns: int = 30,
    max_new_tokens: int = 256,
    max_total_tokens: int = 16384,
    temperature: float = 0.0,
    seed: int = 0,
) -> dict:
    tasks = load_task_set(dataset, instances)
    output.mkdir(parents=True, exist_ok=True)
    results_path, predictions_path = output / "results.jsonl", output / "predictions.jsonl"
    done: dict[str, dict] = {}
    if results_path.exists():
        for line in results_path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                done[record["instance_id"]] = record
    runner = None
    if model not in ORACLES and any(t.id not in done and t.workspace is not None for t in tasks):
        runner = AgentRunner(
            model, engine=engine, base_url=base_url, tokenizer=tokenizer, max_turns=max_turns,
            max_new_tokens=max_new_tokens, max_total_tokens=max_total_tokens, temperature=temperature, seed=seed,
        )  # fmt: skip
    progress = tqdm(tasks, desc="eval-swe", unit="task")
    with results_path.open("a") as results_file, predictions_path.open("a") as predictions_file:
        for index, task in enumerate(progress):
            if task.id in done:
                continue
            started = time.monotonic()
            record: dict = {"instance_id": task.id, "repo": task.repo or task.family, "difficulty": task.difficulty}
            try:
                if task.workspace is None:
                    raise GradingError(f"task {task.id}: {task.unavailable}")
                outcome = _oracle_result(task, model) if model in ORACLES else runner(task, index)
                record.update(outcome)
            except (SandboxError, GradingError) as exc:
                record.update(error=str(exc), patch="", resolved=False)
            record["status"] = status_of(record)
            record["seconds"] = round(time.monotonic() - started, 3)
            if not record.get("error"):
                prediction = {"instance_id": task.id, "model_name_or_path": model, "model_patch": record["patch"]}
                predictions_file.write(json.dumps(prediction) + "\n")
                predictions_file.flush()
            results_file.write(json.dumps(record) + "\n")
            results_file.flush()
            done[task.id] = record
            counts = Counter(r["status"] for r in done.values())
            progress.set_postfix(resolved=counts["resolved"], errors=counts["error"])
    results = [done[t.id] for t in tasks]
    summary = summarize(results)
    (output / "report.json").write_text(json.dumps({"model": model, "dataset": dataset, **summary}, indent=2))
    (output / "report.md").write_text(markdown_report(summary, results, model))
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.swe", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny", help="model name or folder, or gold / empty (oracles)")
    parser.add_argument("--engine", default="hf", choices=["hf", "openai", "vllm"])
    parser.add_argument(
        "--base-url", default=None, help="for --engine openai: the server, e.g. http://localhost:8000/v1"
    )
    parser.add_argument("--tokenizer", default=None, help="tokenizer name or folder (default: --model)")
    parser.add_argument("--dataset", default="builtin", help="builtin, a task folder, a SWE-bench .jsonl, or verified")
    parser.add_argument("--instances", default="", help="comma-separated instance ids (default: all)")
    parser.add_argument("--output", default="runs/eval-swe", type=Path)
    parser.add_argument("--max-turns", type=int, default=30)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--max-total-tokens", type=int, default=16384)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    summary = evaluate(
        model=args.model,
        dataset=args.dataset,
        output=args.output,
        instances=[i for i in args.instances.split(",") if i] or None,
        engine=args.engine,
        base_url=args.base_url,
        tokenizer=args.tokenizer,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        max_total_tokens=args.max_total_tokens,
        temperature=args.temperature,
        seed=args.seed,
    )
    print(json.dumps(summary, indent=2))
    print(f"predictions: {args.output / 'predictions.jsonl'}  report: {args.output / 'report.md'}")


if __name__ == "__main__":
    sys.exit(main())
