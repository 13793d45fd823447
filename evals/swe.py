"""`make eval-swe`: run an agent on SWE tasks, write official predictions, grade, report.

    python -m evals.swe [CONFIG.yaml] [section.field=value ...] [--FLAG VALUE ...]
    python -m evals.swe --model gold --instances ID,ID --workers 4
    python -m evals.swe model.name=gold tasks.ids=[ID,ID] run.workers=4      # the same run

Every option is a field of `evals.config.EvalConfig`, in sections (model, agent, tasks,
grading, run) set as training's are (`section.field=value`, a YAML file of sections), each
with a flat flag too (`--workers` is `run.workers`); `--help` lists them with their defaults.

Each instance runs in its own sandbox (`tasks.sandbox_backend`, `--sandbox local|docker`), on
`run.workers` threads (`evals.pool`); results are appended to `OUTPUT/results.jsonl` as each
finishes (`evals.instance`), with its trajectory in `OUTPUT/trajectories/<id>.json` and its
prediction in `OUTPUT/predictions.jsonl` (SWE-bench's format). A rerun with the same output
folder skips finished instances (resumable) and retries errored ones. Grading (`evals.plan`):
SWE-bench rows go to the official harness where it can run (Docker + the instance image, see
`evals.official`), everything else to the project's sandbox grader, with SWE-bench's verdict
rule (`evals.swebench_verdict`). Where no instance image can be had, `--repo-cache DIR` (a
folder of git clones) gives SWE-bench rows a workspace (the repository at `base_commit`, one
commit) and an environment built with pip from the harness's install specification for the
sandbox backend, before the run (`tasks.swebench`, `agent_env.prepare_environment`); rows
whose environment cannot be had are reported as not runnable here, with the part that
failed, never as unresolved. The report (`report.json`, `report.md`, `report.png`) counts
resolved / unresolved / empty patch / error (infrastructure, never unresolved) per
repository and difficulty, with mean turns and tokens (`evals.report`). `--model gold` /
`--model empty` submit the gold patch or nothing: oracle runs that check grading;
`--validate-gold` also reruns gold failures and quarantines flaky instances
(`evals.quarantine`). `evals/README.md` has the details.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from pathlib import Path

from tqdm import tqdm

from agent_env import needs_environment, prepare_environments
from evals.config import GRADERS, ConfigError, EvalConfig, config_from_argv
from evals.instance import apply_official, grade_officially, record_official_in_trajectory
from evals.official import HarnessCheck, check_harness, harness_version
from evals.plan import PENDING, GradePlan, harness_specs, needs_run, plan_grading, swebench_rows
from evals.pool import RunSandboxes, progress_postfix, run_pool, run_sandboxes
from evals.quarantine import build_quarantine, needs_rerun, read_quarantine, write_quarantine
from evals.report import build_report, markdown_report, status_of, summarize, write_chart
from evals.runner import ORACLES, AgentSolver, OracleSolver, PredictionsSolver, Solver
from evals.serve import ModelServer, ServeError, free_port, vllm_command
from evals.store import RunStore
from sandboxes.console import interrupted, interrupts, setup_logging
from tasks import Task, TaskError, load_task_set

__all__ = ["GRADERS", "EvalConfig", "evaluate", "main", "markdown_report", "status_of", "summarize"]

log = logging.getLogger(__name__)


def _run_id(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(model).name or "run")[:60]


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


def predicted_tasks(tasks: list[Task], solver: PredictionsSolver, *, explicit: bool) -> list[Task]:
    """The tasks a predictions file is graded on: those it has a prediction for. A task the
    file does not name is left out and counted in one log line, never graded as an empty,
    unresolved patch (which would lower the rate of a run made on a few instances); one named
    by `--instances` (`explicit`) without a prediction is an error naming it."""
    missing = [t.id for t in tasks if t.id not in solver.patches]
    if explicit and missing:
        raise ValueError(
            f"{solver.path}: no prediction for {', '.join(missing[:5])}"
            + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            + ": leave them out of --instances, or add their predictions"
        )
    chosen = [t for t in tasks if t.id in solver.patches]
    if missing:
        log.info("%s: predictions for %d of the dataset's %d instances; grading those (the other %d are left out: "
                 "--instances picks others)", solver.path, len(chosen), len(tasks), len(missing))  # fmt: skip
    if unknown := sorted(set(solver.patches) - {t.id for t in tasks}):
        log.warning("%s: %d predictions name instances not in this dataset (e.g. %s): not graded",
                    solver.path, len(unknown), ", ".join(unknown[:3]))  # fmt: skip
    if not chosen:
        raise ValueError(
            f"{solver.path}: none of its {len(solver.patches)} predictions names an instance of the dataset"
        )
    return chosen


def evaluate(config: EvalConfig, *, solver: Solver | None = None, progress: bool = True) -> dict:
    """Evaluate `config.model` on `config.tasks`; write the run into `config.run.output`;
    return the summary. `solver` replaces the model (a test double of the agent);
    `progress` shows a progress bar."""
    grading, workers = config.grading, config.run.workers
    model, dataset, output = config.model.name, config.tasks.source, Path(config.run.output)
    sandbox = config.tasks.sandbox_backend
    sandboxes = run_sandboxes(sandbox)  # stopped on an interrupt
    if grading.validate_gold:
        model = "gold"
    elif config.model.predictions is not None:
        solver = PredictionsSolver(config.model.predictions, sandbox_factory=sandboxes)
        model = solver.name
    tasks = load_task_set(dataset, config.tasks.ids or None, repo_cache=config.tasks.repo_cache)
    if isinstance(solver, PredictionsSolver) and not grading.validate_gold:
        tasks = predicted_tasks(tasks, solver, explicit=bool(config.tasks.ids))
    store = RunStore(output)
    is_agent = solver is None and model not in ORACLES  # a model runs (not oracles, nor a predictions file)
    if is_agent:  # a damaged export stops here, one line naming its first bad file
        from trainer.inference.models import verify_model_folder  # torch: only when a model runs

        verify_model_folder(model)
    engine = config.model.engine
    run = {"model": model, "dataset": dataset, "engine": engine if is_agent else None, "grader": grading.grader}
    run.update(workers=workers, sandbox=sandbox, seed=config.agent.seed, max_turns=config.agent.max_turns,
               temperature=config.agent.temperature)  # fmt: skip
    if config.tasks.repo_cache is not None:
        run["repo_cache"] = str(config.tasks.repo_cache)
    run.update(swebench_version=harness_version(), harness_specs=harness_specs(tasks))
    store.write_run_info({**run, "instances": [t.id for t in tasks], "validate_gold": grading.validate_gold})

    rows = swebench_rows(dataset, tasks) if grading.grader != "project" else []
    harness = check_harness(rows, allow_pull=grading.harness_pull) if rows else HarnessCheck()
    if rows:
        log.info("official harness: %s", harness.describe())
    plans = {t.id: plan_grading(t, grading.grader, harness) for t in tasks}
    tasks = _prepare_environments(
        tasks, plans, sandbox=sandbox, agent=is_agent or bool(solver and solver.needs_workspace), workers=workers
    )
    plans = {t.id: plan_grading(t, grading.grader, harness) for t in tasks}
    agent_options = config.agent_options()
    make_solver = _solver_factory(model, sandboxes, solver, agent_options)
    official_run = dict(
        rows=rows, plans=plans, workdir=output / "official", workers=workers, timeout_s=grading.harness_timeout
    )

    records = store.results()
    retry_errors = not config.run.keep_errors
    work = [(i, t) for i, t in enumerate(tasks) if needs_run(records.get(t.id), plans[t.id], retry_errors)]
    with contextlib.ExitStack() as stack:
        _serve_if_needed(stack, engine=engine, model=model, agent=is_agent and bool(work), output=output,
                         seed=config.agent.seed, serve_args=config.model.serve_args, agent_options=agent_options)  # fmt: skip
        _solve(tasks, work, store, records, make_solver=make_solver, plans=plans, model=model, workers=workers,
               progress=progress, stop=sandboxes.stop)  # fmt: skip
    _grade_pending(tasks, store, records, model=model, official_run=official_run)

    results = [records[t.id] for t in tasks]
    quarantine_data = read_quarantine(grading.quarantine) if grading.quarantine else None
    if grading.validate_gold:
        quarantine_data = _validate_gold(
            tasks, results, store=store, reruns=grading.reruns, make_solver=make_solver, plans=plans,
            official_run=official_run, stop=sandboxes.stop,
        )  # fmt: skip
    harness_info = (
        {"summary": harness.describe(), "images": harness.ready, "not_ready": harness.not_ready} if rows else {}
    )
    report = build_report(
        results,
        run=run,
        quarantine=quarantine_data,
        gold_failures=(quarantine_data or {}).get("gold_failures") if grading.validate_gold else None,
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
    bar.set_postfix(progress_postfix(records))

    def on_done(record: dict, trajectory: dict) -> None:
        store.write_trajectory(record["instance_id"], trajectory)
        if record["status"] != "error":
            store.append_prediction(record["instance_id"], model, trajectory["patch"])
        store.append_result(record)
        records[record["instance_id"]] = record
        bar.set_postfix(progress_postfix(records))

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
        final = apply_official(record, verdicts[record["instance_id"]])
        store.append_result(final)
        record_official_in_trajectory(store, final, verdicts[record["instance_id"]])
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
                round_records[record["instance_id"]] = apply_official(record, verdicts[record["instance_id"]])
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
    """The command line (`evals.config`: a YAML file, `section.field=value` overrides and the
    flags, all generated from `EvalConfig`); the summary as JSON on stdout; a bad flag,
    override, file or dataset is one line on stderr and exit code 2; a run
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
    output = Path(config.run.output)
    sys.stdout.write(f"predictions: {output / 'predictions.jsonl'}  report: {output / 'report.md'}\n")
    if all_errored(summary):
        log.error(
            "every instance errored (%d of %d): no verdict to report; the errors are in %s",
            summary["error"], summary["counted"], output / "report.md",
        )  # fmt: skip
        return 1
    return 0


def all_errored(summary: dict) -> bool:
    """No counted instance reached a verdict: the run measured nothing (no environment, no
    repository, a dead engine), which a script must not take for a result."""
    return summary["counted"] > 0 and summary["error"] == summary["counted"]


def _kept(config: EvalConfig | None) -> str:
    """What an interrupted run kept, and how to go on: the line it ends with."""
    output = Path(config.run.output) if config is not None else None
    store = RunStore(output) if output is not None and output.is_dir() else None
    instances = (store.run_info().get("instances") or []) if store is not None else []
    if not instances:
        return "nothing was run yet; run the same command again to start"
    results = store.results()
    done = sum(1 for i in instances if i in results and results[i]["status"] != "error")
    return f"{done} of {len(instances)} instances finished ({output}); run the same command again to continue"


if __name__ == "__main__":
    sys.exit(main())
