"""`make eval-swe`: run an agent on SWE tasks, write official predictions, grade, report.

    python -m evals.swe [--config FILE.yaml] [--model tiny|PATH|NAME|gold|empty]
                        [--engine hf|openai|vllm] [--dataset builtin|DIR|PATH.jsonl|verified] [--instances ID,ID]
                        [--repo-cache DIR] [--workers N] [--grader auto|project|official]
                        [--output DIR] [--validate-gold [--reruns N]] [--quarantine PATH] ...

Every option is a field of `evals.config.EvalConfig` (its flags and `--help` are generated
from it; `--config` reads the same fields from YAML, flags override the file).

Each instance runs in its own sandbox (`--sandbox local|docker`), on `--workers` threads;
results are appended to `OUTPUT/results.jsonl` as each finishes, with its trajectory in
`OUTPUT/trajectories/<id>.json` and its prediction in `OUTPUT/predictions.jsonl`
(SWE-bench's format). A rerun with the same `--output` skips finished instances
(resumable) and retries errored ones. Grading: SWE-bench rows go to the official harness
where it can run (Docker + the instance image, see `evals.official`), everything else to
the project's sandbox grader, with SWE-bench's verdict rule (`evals.swebench_verdict`). Where no
instance image can be had, `--repo-cache DIR` (a folder of git clones) gives SWE-bench rows
a workspace (the repository at `base_commit`, one commit) and an environment built with pip
from the harness's install specification for the `--sandbox` backend, before the run
(`tasks.swebench`, `agent_env.prepare_environment`); rows whose environment cannot be had
are reported as not runnable here, with the part that failed, never as unresolved. The report
(`report.json`, `report.md`, `report.png`) counts resolved / unresolved / empty patch /
error (infrastructure, never unresolved) per repository and difficulty, with mean turns
and tokens (`evals.report`). `--model gold` / `--model empty` submit the gold patch or
nothing: oracle runs that check grading; `--validate-gold` also reruns gold failures and
quarantines flaky instances (`evals.validate`). `evals/README.md` has the details.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

from agent_env import GradingError, needs_environment, network_failure, prepare_environments
from evals.config import GRADERS, ConfigError, EvalConfig, config_from_argv
from evals.swebench_verdict import verdict
from evals.official import HarnessCheck, OfficialVerdict, check_harness, harness_version, run_harness
from evals.report import build_report, markdown_report, status_of, summarize, write_chart
from evals.runner import ORACLES, AgentSolver, Attempt, OracleSolver, PredictionsSolver, SandboxFactory, Solver
from evals.serve import ModelServer, ServeError, free_port, vllm_command
from evals.store import RunStore, trajectory_name
from evals.validate import build_quarantine, needs_rerun, read_quarantine, write_quarantine
from sandboxes import SandboxError, make_sandbox
from sandboxes.console import deferred, interrupted, interrupts, setup_logging
from tasks import Task, TaskError, load_task_set
from trainer.inference.engines.base import EngineError

__all__ = ["GRADERS", "EvalConfig", "evaluate", "main", "markdown_report", "status_of", "summarize"]

log = logging.getLogger(__name__)
# Failures of the machinery around the model: recorded as errors, never as unresolved.
INFRA_ERRORS = (SandboxError, GradingError, EngineError, TaskError)
# Rules of the grading contract that mean the test run's account cannot be trusted: an
# evaluation fails them as training does (XFAIL / SKIPPED follow SWE-bench's own rule here).
INTEGRITY_RULES = frozenset({"patch_rejected", "patch_too_large", "canary_passed", "grading_crashed_by_patch"})
PENDING = "pending_official"
POLL_S = 0.2
STOP_WAIT_S = 5.0
"""On an interrupt, how long the running instances get to end once their sandboxes are closed."""
LOG_TAIL_CHARS = 4000


@dataclass(frozen=True)
class GradePlan:
    """How one instance is graded: by the `project` sandbox grader, the `official` harness
    (in its instance `image`), or not at all (`error`, with the reason)."""

    kind: str
    reason: str = ""
    image: str = ""


def is_swebench_row(task: Task) -> bool:
    return task.grading.log_parser == "swebench" and bool(task.repo)


def plan_grading(task: Task, grader: str, harness: HarnessCheck) -> GradePlan:
    """Pick the grader of one instance; the reason names what is missing when none can."""
    if task.id in harness.ready and grader in ("auto", "official"):
        return GradePlan("official", image=harness.ready[task.id])
    if grader == "official":
        why = harness.not_ready.get(task.id) or "not a SWE-bench row: the official harness grades only those"
        return GradePlan("error", f"the official harness cannot grade it here: {why}")
    if task.workspace is not None and not task.unavailable:
        return GradePlan("project")
    reason = task.unavailable or "no workspace"
    if task.id in harness.not_ready:
        reason += f"; official harness: {harness.not_ready[task.id]}"
    return GradePlan("error", reason)


def harness_specs(tasks: list[Task]) -> dict[str, dict]:
    """The harness specification each (repository, version) of the run's SWE-bench rows was
    made from, with how many instances use it, keyed `repo version`, sorted."""
    specs: dict[str, dict] = {}
    for task in tasks:
        if task.harness_spec:
            key = f"{task.harness_spec['repo']} {task.harness_spec['version']}"
            specs.setdefault(key, {**task.harness_spec, "instances": 0})["instances"] += 1
    return dict(sorted(specs.items()))


def swebench_rows(dataset: str, tasks: list[Task]) -> list[dict]:
    """The raw rows of the SWE-bench tasks (the official harness needs them whole)."""
    wanted = {t.id for t in tasks if is_swebench_row(t)}
    if not wanted:
        return []
    from tasks.swebench import HF_DATASETS, read_rows

    source = HF_DATASETS[0] if dataset == "verified" else dataset
    return [row for _, row in read_rows(source) if row.get("instance_id") in wanted]


# -- one instance ---------------------------------------------------------------------------


def _base_record(task: Task) -> dict:
    return {"instance_id": task.id, "repo": task.repo or task.family, "difficulty": task.difficulty}


def listed_failures(failed: Sequence[str], missing: Sequence[str]) -> dict[str, list[str]]:
    """`failed_tests` (named in the log with a failing status) and `missing_tests` (not in
    the log at all) of a record: SWE-bench counts a missing test among the failures, but a
    report lists each test once, under what happened to it."""
    return {"failed_tests": [t for t in failed if t not in missing], "missing_tests": list(missing)}


def _grade_fields(task: Task, attempt: Attempt) -> dict:
    """The project grader's result under SWE-bench's rule (`evals.swebench_verdict.verdict`)."""
    grade = attempt.grade
    if grade is None:  # the episode ended without a grade: the agent broke its sandbox
        return {"resolved": False, "note": f"ended: {attempt.end}", "failed_tests": [], "grader": "project"}
    if not grade.patch_applied:
        return {"resolved": False, "note": "the patch does not apply", "failed_tests": [], "grader": "project"}
    result = verdict(grade.statuses, task.grading.fail_to_pass, task.grading.pass_to_pass)
    # SWE-bench's rule decides XFAIL and SKIPPED; a forged or incomplete test run fails here too.
    forged = [rule for rule in grade.blocked if rule in INTEGRITY_RULES]
    fields = {
        # The verdict run's exit status decides as it does for training: a log cannot pass a test.
        "resolved": result.resolved and not forged and grade.exit_code == 0,
        "grader": "project",
        **listed_failures(result.failed, result.missing),
    }
    if result.ignored:
        fields["ignored_tests"] = list(result.ignored)
    if grade.blocked:
        fields["reward_hack_blocked"] = list(grade.blocked)
    if forged:
        fields["note"] = "; ".join(grade.problems) or ", ".join(forged)
    if grade.resolved != fields["resolved"]:  # agent_env's stricter rule (see evals.swebench_verdict)
        fields["agent_env_resolved"] = grade.resolved
    required = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
    if not result.resolved and (line := network_failure(grade.log, grade.statuses, required)):
        fields["network_error"] = line  # a required test failed on the network: see evals.validate
    return fields


def _trajectory(task: Task, model: str, record: dict, attempt: Attempt | None, started_at: str) -> dict:
    grade = attempt.grade if attempt else None
    return {
        "instance_id": task.id,
        "model": model,
        "status": record["status"],
        "resolved": record.get("resolved", False),
        "grader": record.get("grader"),
        "error": record.get("error"),
        "patch": attempt.patch if attempt else "",
        "turns": record.get("turns", 0),
        "tokens": record.get("tokens", 0),
        "policy_tokens": record.get("policy_tokens", 0),
        "end": record.get("end"),
        "timings": {
            "started_at": started_at,
            "solve_s": attempt.solve_s if attempt else None,
            "grade_s": attempt.grade_s if attempt else None,
            "total_s": record["seconds"],
            **({"cost": attempt.cost} if attempt and attempt.cost else {}),
        },
        "grade": None
        if grade is None
        else {
            "patch_applied": grade.patch_applied,
            "failed_tests": record.get("failed_tests", []),
            "missing_tests": record.get("missing_tests", []),
            "statuses": grade.statuses,
            "log_tail": grade.log[-LOG_TAIL_CHARS:],
        },
        "transcript": attempt.transcript if attempt else [],
    }


def attempt_instance(task: Task, index: int, solver: Solver, plan: GradePlan, model: str) -> tuple[dict, dict]:
    """Solve and (unless the official harness will) grade one instance: its record and its
    trajectory. Infrastructure failures become an `error` record naming the instance."""
    record, attempt = _base_record(task), None
    started, started_at = time.monotonic(), datetime.now(UTC).isoformat(timespec="seconds")
    try:
        if plan.kind == "error":
            raise GradingError(f"task {task.id}: {plan.reason}")
        if solver.needs_workspace and (task.workspace is None or task.unavailable):
            raise GradingError(f"task {task.id}: the agent cannot run: {task.unavailable or 'no workspace'}")
        attempt = solver(task, index, grade=plan.kind == "project")
    except INFRA_ERRORS as exc:
        record.update(error=str(exc), patch="", resolved=False)
        if task.unavailable:  # its environment cannot be had here: not runnable, reported apart
            record["unavailable"] = task.unavailable
    except Exception as exc:  # a bug, not infrastructure: stop, but say which instance
        raise RuntimeError(f"instance {task.id}: {type(exc).__name__}: {exc}") from exc
    if attempt is not None:
        record.update(
            patch=attempt.patch,
            turns=attempt.turns,
            tokens=attempt.tokens,
            policy_tokens=attempt.policy_tokens,
            end=attempt.end,
            resolved=False,
        )
        if attempt.cost:
            record["cost"] = attempt.cost
        if plan.kind == "project":
            record.update(_grade_fields(task, attempt))
    record["status"] = status_of(record)
    if plan.kind == "official" and record["status"] not in ("error", "empty_patch"):
        record.update(status=PENDING, grader="official")
    record["seconds"] = round(time.monotonic() - started, 3)
    record["trajectory"] = f"trajectories/{trajectory_name(task.id)}"
    return record, _trajectory(task, model, record, attempt, started_at)


# -- the pool ----------------------------------------------------------------------------------


def _progress_postfix(records: dict[str, dict]) -> dict[str, int]:
    counts = Counter(r["status"] for r in records.values())
    return {"resolved": counts["resolved"], "unresolved": counts["unresolved"], "errors": counts["error"]}


def run_pool(
    work: list[tuple[int, Task]],
    *,
    solver_factory,
    plans: dict[str, GradePlan],
    model: str,
    workers: int,
    on_done,
    progress: tqdm | None = None,
    stop=None,
) -> None:
    """Run `work` on `workers` threads; `on_done(record, trajectory)` is called in this
    thread as each instance finishes, so files are written by one thread, in finish order,
    each one whole (`deferred`). On an interrupt (KeyboardInterrupt), what finished before it
    is written, `stop()` ends the running instances (closes their sandboxes), the queue is
    dropped, and the interrupt goes on once the threads are gone (or after `STOP_WAIT_S`);
    what the stopped instances return is not written: a rerun runs them."""
    if not work:
        return
    solver = solver_factory()
    executor = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="eval-swe")
    futures: set[Future] = {
        executor.submit(attempt_instance, task, index, solver, plans[task.id], model) for index, task in work
    }

    def finish(future: Future) -> None:
        futures.discard(future)
        with deferred():  # a record is written whole, or not at all
            on_done(*future.result())
        if progress is not None:
            progress.update()

    try:
        while futures:
            # A timeout, so that this thread runs a signal's handler at once (the kernel may
            # deliver the signal to a worker thread, which cannot wake this one).
            finished, _ = wait(futures, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in finished:
                finish(future)
    except KeyboardInterrupt:
        running = [f for f in futures if not f.cancel()]
        for future in [f for f in running if f.done() and f.exception() is None]:
            finish(future)  # finished before the interrupt reached this thread
        if stop is not None:
            stop()
        executor.shutdown(wait=False, cancel_futures=True)
        wait(running, timeout=STOP_WAIT_S)
        raise
    finally:
        # On an exception, do not wait for the queue: what finished is already written.
        executor.shutdown(wait=not futures, cancel_futures=True)


class RunSandboxes:
    """The sandbox factory of a run's instances, which remembers the live sandboxes so that
    `stop()` (on an interrupt) can close them: the instances running in them then end at
    once with an error nobody records, and no new sandbox starts."""

    def __init__(self, factory: SandboxFactory | None = None) -> None:
        self.factory = factory or make_sandbox
        self.live: weakref.WeakSet = weakref.WeakSet()
        self.stopped = False
        self.lock = threading.Lock()

    def __call__(self, spec):
        if self.stopped:
            raise SandboxError("the run was interrupted")
        sandbox = self.factory(spec)
        with self.lock:
            if not self.stopped:
                self.live.add(sandbox)
                return sandbox
        sandbox.close()
        raise SandboxError("the run was interrupted")

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            live = list(self.live)
        for sandbox in live:
            with contextlib.suppress(Exception):
                sandbox.close()


# -- official grading --------------------------------------------------------------------------


def grade_officially(
    pending: list[dict],
    *,
    rows: list[dict],
    plans: dict[str, GradePlan],
    predictions: dict[str, dict],
    workdir: Path,
    run_id: str,
    workers: int,
    timeout_s: int,
) -> dict[str, OfficialVerdict]:
    """Run the official harness on the pending instances' predictions."""
    batch = [predictions[record["instance_id"]] for record in pending]
    log.info("official harness: grading %d instance(s); log: %s", len(batch), workdir / "harness.log")
    return run_harness(rows, batch, workdir=workdir, run_id=run_id, max_workers=workers, timeout_s=timeout_s)


def _apply_official(record: dict, official: OfficialVerdict) -> dict:
    final = {**record, "status": official.status, "resolved": official.status == "resolved", "grader": "official"}
    if official.status == "error":
        final["error"] = f"task {record['instance_id']}: {official.note}"
    elif official.note:
        final["note"] = official.note
    if official.tests_status:
        failures = [
            *official.tests_status.get("FAIL_TO_PASS", {}).get("failure", []),
            *official.tests_status.get("PASS_TO_PASS", {}).get("failure", []),
        ]
        final.update(listed_failures(failures, record.get("missing_tests", [])))
    final["official_log_dir"] = official.log_dir
    return final


def _record_official_in_trajectory(store: RunStore, record: dict, official: OfficialVerdict) -> None:
    path = store.root / record["trajectory"]
    data = json.loads(path.read_text()) if path.exists() else {"instance_id": record["instance_id"]}
    data.update(status=record["status"], resolved=record["resolved"], grader="official", error=record.get("error"))
    data["official"] = {"status": official.status, "note": official.note, "tests_status": official.tests_status}
    data["official"]["log_dir"] = official.log_dir
    store.write_trajectory(record["instance_id"], data)


# -- the run -----------------------------------------------------------------------------------


def _needs_run(record: dict | None, plan: GradePlan, retry_errors: bool) -> bool:
    """Whether an instance runs (again): not yet run, an error to retry, or left waiting for
    an official harness that can no longer grade it."""
    if record is None:
        return True
    if record["status"] == PENDING:
        return plan.kind != "official"
    return record["status"] == "error" and retry_errors


def _run_id(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(model).name or "run")[:60]


def sandbox_factory(backend: str) -> SandboxFactory | None:
    """How sandboxes are made: None is the default (local) backend."""
    return None if backend == "local" else (lambda spec: make_sandbox(spec, backend))


def run_sandboxes(backend: str) -> RunSandboxes:
    """The run's sandbox factory for `backend`, able to stop every sandbox on an interrupt."""
    return RunSandboxes(sandbox_factory(backend))


def _solver_factory(model: str, sandboxes: RunSandboxes, solver: Solver | None, agent_options: dict):
    """Makes the run's solver on first use (an agent loads its model then, not before)."""

    def make() -> Solver:
        if solver is not None:
            return solver
        if model in ORACLES:
            return OracleSolver(model, sandbox_factory=sandboxes)
        return AgentSolver(model, sandbox_factory=sandboxes, **agent_options)

    return make


def _serve_if_needed(stack: contextlib.ExitStack, *, engine: str, model: str, agent: bool, output: Path,
                     seed: int, serve_args: str, agent_options: dict) -> None:  # fmt: skip
    """`--engine vllm`: start `vllm serve` for the run and point the agent's openai engine at it."""
    if engine != "vllm" or not agent:
        return
    port = free_port()
    command = vllm_command(model, port, seed=seed, extra_args=serve_args)
    server = stack.enter_context(ModelServer(command, port, output / "vllm.log"))
    agent_options.update(engine="openai", base_url=server.base_url)


def evaluate(config: EvalConfig, *, solver: Solver | None = None, progress: bool = True) -> dict:
    """Evaluate `config.model` on `config.dataset`; write the run into `config.output`;
    return the summary. `solver` replaces the model (a test double of the agent);
    `progress` shows a progress bar."""
    model, dataset, output, sandbox = config.model, config.dataset, Path(config.output), config.sandbox
    sandboxes = run_sandboxes(sandbox)  # stopped on an interrupt
    if config.validate_gold:
        model = "gold"
    elif config.predictions is not None:
        solver = PredictionsSolver(config.predictions, sandbox_factory=sandboxes)
        model = solver.name
    tasks = load_task_set(dataset, config.instances or None, repo_cache=config.repo_cache)
    store = RunStore(output)
    is_agent = solver is None and model not in ORACLES  # a model runs (not oracles, nor a predictions file)
    if is_agent:  # a damaged export stops here, one line naming its first bad file
        from trainer.inference.models import verify_model_folder  # torch: only when a model runs

        verify_model_folder(model)
    run = {"model": model, "dataset": dataset, "engine": config.engine if is_agent else None, "grader": config.grader}
    run.update(workers=config.workers, sandbox=sandbox, seed=config.seed, max_turns=config.max_turns,
               temperature=config.temperature)  # fmt: skip
    if config.repo_cache is not None:
        run["repo_cache"] = str(config.repo_cache)
    run.update(swebench_version=harness_version(), harness_specs=harness_specs(tasks))
    store.write_run_info({**run, "instances": [t.id for t in tasks], "validate_gold": config.validate_gold})

    grader = config.grader
    rows = swebench_rows(dataset, tasks) if grader != "project" else []
    harness = check_harness(rows, allow_pull=config.harness_pull) if rows else HarnessCheck()
    if rows:
        log.info("official harness: %s", harness.describe())
    plans = {t.id: plan_grading(t, grader, harness) for t in tasks}
    tasks = _prepare_environments(
        tasks, plans, sandbox=sandbox, agent=is_agent or bool(solver and solver.needs_workspace), workers=config.workers
    )
    plans = {t.id: plan_grading(t, grader, harness) for t in tasks}
    agent_options = config.agent_options()
    make_solver = _solver_factory(model, sandboxes, solver, agent_options)
    official_run = dict(
        rows=rows, plans=plans, workdir=output / "official", workers=config.workers, timeout_s=config.harness_timeout
    )

    records = store.results()
    retry_errors = not config.keep_errors
    work = [(i, t) for i, t in enumerate(tasks) if _needs_run(records.get(t.id), plans[t.id], retry_errors)]
    with contextlib.ExitStack() as stack:
        _serve_if_needed(stack, engine=config.engine, model=model, agent=is_agent and bool(work), output=output,
                         seed=config.seed, serve_args=config.serve_args, agent_options=agent_options)  # fmt: skip
        _solve(tasks, work, store, records, make_solver=make_solver, plans=plans, model=model, workers=config.workers,
               progress=progress, stop=sandboxes.stop)  # fmt: skip
    _grade_pending(tasks, store, records, model=model, official_run=official_run)

    results = [records[t.id] for t in tasks]
    quarantine_data = read_quarantine(config.quarantine) if config.quarantine else None
    if config.validate_gold:
        quarantine_data = _validate_gold(
            tasks, results, store=store, reruns=config.reruns, make_solver=make_solver, plans=plans,
            official_run=official_run, stop=sandboxes.stop,
        )  # fmt: skip
    harness_info = (
        {"summary": harness.describe(), "images": harness.ready, "not_ready": harness.not_ready} if rows else {}
    )
    report = build_report(
        results,
        run=run,
        quarantine=quarantine_data,
        gold_failures=(quarantine_data or {}).get("gold_failures") if config.validate_gold else None,
        harness=harness_info,
    )
    _write_reports(output, report, results, model)
    return summarize(results, [q["instance_id"] for q in (quarantine_data or {}).get("quarantined", [])])


def _prepare_environments(
    tasks: list[Task], plans: dict[str, GradePlan], *, sandbox: str, agent: bool, workers: int
) -> list[Task]:
    """Build the environments of the tasks that need one here (the project grader grades
    them, or an agent works in them) for the `sandbox` backend, once each (different specs
    on up to `workers` threads; one shared part per (repo, version) spec); a task whose
    environment cannot be built comes back unavailable, with the reason."""
    wanted = [t for t in tasks if needs_environment(t) and (agent or plans[t.id].kind == "project")]
    if not wanted:
        return tasks
    built = {t.id: t for t in prepare_environments(wanted, sandbox, workers=workers)}
    failed = [t for t in built.values() if t.unavailable]
    for task in failed:
        log.warning("not runnable here: %s: %s", task.id, task.unavailable.splitlines()[0])
    return [built.get(t.id, t) for t in tasks]


def _solve(
    tasks: list[Task],
    work: list[tuple[int, Task]],
    store: RunStore,
    records: dict[str, dict],
    *,
    make_solver,
    plans: dict[str, GradePlan],
    model: str,
    workers: int,
    progress: bool,
    stop=None,
) -> None:
    """Run the instances of `work`, writing each one's trajectory, prediction and record as
    it finishes, with a progress bar (resolved so far, errors, ETA)."""
    bar = tqdm(total=len(tasks), initial=len(tasks) - len(work), desc="eval-swe", unit="inst", disable=not progress)
    bar.set_postfix(_progress_postfix(records))

    def on_done(record: dict, trajectory: dict) -> None:
        store.write_trajectory(record["instance_id"], trajectory)
        if record["status"] != "error":
            store.append_prediction(record["instance_id"], model, trajectory["patch"])
        store.append_result(record)
        records[record["instance_id"]] = record
        bar.set_postfix(_progress_postfix(records))

    try:
        run_pool(work, solver_factory=make_solver, plans=plans, model=model, workers=workers, on_done=on_done,
                 progress=bar, stop=stop)  # fmt: skip
    finally:
        bar.close()
        store.compact_predictions([t.id for t in tasks])


def _grade_pending(tasks: list[Task], store: RunStore, records: dict[str, dict], *, model: str, official_run: dict):
    """Grade the instances waiting for the official harness; append their final records."""
    pending = [records[t.id] for t in tasks if records[t.id]["status"] == PENDING]
    if not pending:
        return
    verdicts = grade_officially(pending, predictions=store.predictions(), run_id=_run_id(model), **official_run)
    for record in pending:
        final = _apply_official(record, verdicts[record["instance_id"]])
        store.append_result(final)
        _record_official_in_trajectory(store, final, verdicts[record["instance_id"]])
        records[record["instance_id"]] = final


def _validate_gold(
    tasks: list[Task],
    results: list[dict],
    *,
    store: RunStore,
    reruns: int,
    make_solver,
    plans: dict[str, GradePlan],
    official_run: dict,
    stop=None,
) -> dict:
    """Rerun the gold failures `reruns` times; write and return `quarantine.json`."""
    first = {r["instance_id"]: r for r in results}
    again = [(i, t) for i, t in enumerate(tasks) if needs_rerun(first[t.id])]
    outcomes: dict[str, list[str]] = {t.id: [] for _, t in again}
    for round_number in range(1, reruns + 1) if again else ():
        round_records: dict[str, dict] = {}
        bar = tqdm(total=len(again), desc=f"gold rerun {round_number}/{reruns}", unit="inst")

        def keep(record: dict, trajectory: dict, _round: dict = round_records) -> None:
            _round[record["instance_id"]] = record

        try:
            run_pool(again, solver_factory=make_solver, plans=plans, model="gold", workers=official_run["workers"],
                     on_done=keep, progress=bar, stop=stop)  # fmt: skip
        finally:
            bar.close()
        pending = [r for r in round_records.values() if r["status"] == PENDING]
        if pending:
            predictions = {t.id: {"instance_id": t.id, "model_name_or_path": "gold", "model_patch": t.gold_patch}
                           for _, t in again}  # fmt: skip
            verdicts = grade_officially(
                pending, predictions=predictions, run_id=f"gold-rerun-{round_number}", **official_run
            )
            for record in pending:
                round_records[record["instance_id"]] = _apply_official(record, verdicts[record["instance_id"]])
        for instance_id, record in round_records.items():
            outcomes[instance_id].append(record["status"])
    data = build_quarantine(first, outcomes, reruns)
    write_quarantine(store.root, data)
    return data


def _write_reports(output: Path, report: dict, results: list[dict], model: str) -> None:
    (output / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (output / "report.md").write_text(markdown_report(report, results, model, report))
    write_chart(report, output / "report.png")


def main(argv: list[str] | None = None) -> int:
    """The command line: flags generated from `EvalConfig` (`evals.config`); the summary as
    JSON on stdout; a bad flag, file or dataset is one line on stderr and exit code 2; a run
    where every instance errored is one line on stderr and exit code 1.
    Ctrl-C or SIGTERM stops the run within seconds, keeps every finished instance and says
    how to continue (exit code 130 or 143)."""
    setup_logging()
    config = None
    with interrupts():
        try:
            config = config_from_argv(argv, prog="python -m evals.swe", description=__doc__.split("\n")[0])
            summary = evaluate(config)
        except (ConfigError, TaskError, ValueError, NotImplementedError, ServeError) as exc:
            log.error("%s", exc)
            return 2
        except KeyboardInterrupt as exc:
            return interrupted(exc, _kept(config))
    # The command's result goes to stdout (scripts read it); what happens on the way is logged.
    sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    sys.stdout.write(f"predictions: {config.output / 'predictions.jsonl'}  report: {config.output / 'report.md'}\n")
    if all_errored(summary):
        log.error(
            "every instance errored (%d of %d): no verdict to report; the errors are in %s",
            summary["error"], summary["counted"], Path(config.output) / "report.md",
        )  # fmt: skip
        return 1
    return 0


def all_errored(summary: dict) -> bool:
    """No counted instance reached a verdict: the run measured nothing (no environment, no
    repository, a dead engine), which a script must not take for a result."""
    return summary["counted"] > 0 and summary["error"] == summary["counted"]


def _kept(config: EvalConfig | None) -> str:
    """What an interrupted run kept, and how to go on: the line it ends with."""
    store = RunStore(Path(config.output)) if config is not None and Path(config.output).is_dir() else None
    instances = (store.run_info().get("instances") or []) if store is not None else []
    if not instances:
        return "nothing was run yet; run the same command again to start"
    results = store.results()
    done = sum(1 for i in instances if i in results and results[i]["status"] != "error")
    return f"{done} of {len(instances)} instances finished ({config.output}); run the same command again to continue"


if __name__ == "__main__":
    sys.exit(main())
