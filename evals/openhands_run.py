"""Run the OpenHands agent (openhands-sdk) on this project's tasks, in this project's sandboxes.

Run by the Python 3.12 venv `make openhands-venv` builds (`.venv-openhands`), from the
repository root, never by the project's own venv (openhands-sdk needs Python 3.12):

    .venv-openhands/bin/python -m evals.openhands_run --dataset builtin \\
        --instances ID1,ID2 --base-url http://127.0.0.1:8000/v1 --model policy --output runs/oh

It writes `OUTPUT/predictions.jsonl` (SWE-bench's format; grade it with
`python -m evals.swe --predictions OUTPUT/predictions.jsonl`) and `OUTPUT/trajectories/<id>.json`
(every OpenHands event of the conversation, the patch, the seconds). How the agent's tools
reach the sandbox: `evals/openhands_adapter.py`. This module checks its arguments, the
tasks and the server before it imports the SDK (which takes seconds), so that bad input
is a one-line error at once.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tasks import TaskError, load_task_set

log = logging.getLogger("evals.openhands_run")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.openhands_run",
        description="Run the OpenHands agent (openhands-sdk) on tasks, its tools acting in this project's "
        "sandboxes; write predictions.jsonl (SWE-bench's format) and a trajectory per task.",
        epilog="example: .venv-openhands/bin/python -m evals.openhands_run --dataset builtin "
        "--base-url http://127.0.0.1:8000/v1 --model policy --output runs/openhands",
    )
    parser.add_argument("--dataset", default="builtin", help="task source, as evals.swe's --dataset")
    parser.add_argument("--instances", default="", help="comma-separated task ids (all when empty)")
    parser.add_argument("--base-url", required=True, help="the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--api-key", default="EMPTY", help="the server's key (default: none needed)")
    parser.add_argument("--output", type=Path, default=Path("runs/openhands"), help="folder to write to")
    parser.add_argument("--max-iterations", type=int, default=30, help="agent steps per task")
    parser.add_argument(
        "--repo-cache", type=Path, help="folder of git clones SWE-bench rows are made from (their environments "
        "are built here first, in local sandboxes)"
    )  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    missing = [name for name in ("openhands.sdk", "openhands.tools") if not _importable(name)]
    if missing:
        print(f"error: evals.openhands_run needs openhands-sdk and openhands-tools ({', '.join(missing)} not found "
              f"by {sys.executable}); run it with .venv-openhands/bin/python (make openhands-venv builds it)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        ids = [i.strip() for i in args.instances.split(",") if i.strip()]
        tasks = load_task_set(args.dataset, ids or None, repo_cache=args.repo_cache)
    except TaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from agent_env import prepare_environments

    tasks = prepare_environments(tasks, "local")  # SWE-bench rows: the harness's spec, built once per spec
    unavailable = [t.id for t in tasks if t.unavailable]
    if unavailable:
        print(f"error: not runnable here: {', '.join(unavailable)} (see `python -m tasks list`)", file=sys.stderr)
        return 2
    if problem := server_problem(args.base_url):
        print(f"error: cannot reach the model server at {args.base_url} ({problem}): start it first "
              "(vllm serve MODEL, or python -m evals.serve --scripted gold) or pass its --base-url", file=sys.stderr)  # fmt: skip
        return 2
    from evals.openhands_adapter import make_llm, run_task  # the SDK: imported once the input is known good

    llm = make_llm(args.model, args.base_url, args.api_key)
    args.output.mkdir(parents=True, exist_ok=True)
    predictions = args.output / "predictions.jsonl"
    predictions.write_text("")
    failed = []
    for task in tasks:
        prediction = run_task(task, llm, args.output, max_iterations=args.max_iterations)
        if prediction is None:
            failed.append(task.id)
            continue
        with predictions.open("a") as f:
            f.write(json.dumps(prediction) + "\n")
    log.info("wrote %d prediction(s) to %s", len(tasks) - len(failed), predictions)
    if failed:
        print(f"error: {len(failed)} conversation(s) failed: {', '.join(failed)} "
              f"(the reasons are in {args.output / 'trajectories'}); rerun them with --instances", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def server_problem(base_url: str) -> str | None:
    """Why `base_url` answers no `GET /models` (None: it does)."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=10):
            return None
    except urllib.error.HTTPError as exc:
        return None if exc.code in (401, 403) else f"HTTP {exc.code} from /models"  # a server that wants a key
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))


if __name__ == "__main__":
    sys.exit(main())
