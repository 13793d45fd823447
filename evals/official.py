"""SWE-bench's official harness, where it can run: a Docker engine and the instances' images.

The harness is swebench 5 (pinned exactly by the `swebench` extra). Unlike 4.x it builds no
specification of its own: `swebench.harness.utils.make_test_spec` reads the instance's image
name, eval script, log parser and eval type from columns of the dataset row (`image`,
`eval_script`, `log_parser`, `eval_type`), which the current SWE-bench datasets and task
repositories carry. Rows without them (older exports, like the offline Verified file this
project is tested with) cannot be graded by it: they go to the project grader, whose
environment comes from `tasks.swebench_specs`.

`check_harness(rows)` says, per instance, whether the harness can grade it here. It needs
- a reachable Docker engine (the `docker` extra and a daemon);
- the row's harness columns (above), from which `make_test_spec` makes its `TestSpec`;
- the instance image the row names, present locally (pulled, or built by
  `swebench images build`, which gives it the same name); with `allow_pull` an absent
  image counts as available and the harness pulls it.

`run_harness(...)` runs swebench 5's command line (`swebench eval DATASET -p PREDICTIONS`)
on a predictions file, in a working directory of its own (the harness writes
`logs/run_evaluation/<run_id>/<model>/<instance>/` under its current directory), and
`read_report` turns those per-instance logs into verdicts: `report.json` gives resolved or
not, unless its `infra_failure` says the environment broke (an error); a patch that does
not apply is unresolved (the agent's doing); anything else without a report (an image that
cannot be pulled, a test run past the timeout, a crash) is an infrastructure error, never
unresolved.

For a run (`evals.swe`), `evals.instance` grades the instances waiting for the harness with
it and makes its verdicts their final records.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes.reaper import list_images

logger = logging.getLogger(__name__)

# swebench 5's command line (`swebench eval ...`), run with this interpreter: the console
# script may be absent or point at another one.
HARNESS_CLI = "from swebench.cli.cli import main; main()"
# The columns swebench 5's make_test_spec reads from a row beyond the classic ones.
HARNESS_COLUMNS = ("image", "eval_script", "log_parser", "eval_type")
# Strings the harness writes in run_instance.log (swebench.harness.constants, run_evaluation).
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
TIMED_OUT = "Test timed out after"


@dataclass(frozen=True)
class HarnessCheck:
    """Which instances the official harness can grade here, and why not the others."""

    ready: dict[str, str] = field(default_factory=dict)
    """instance id -> the instance image it runs in."""
    not_ready: dict[str, str] = field(default_factory=dict)
    """instance id -> why the harness cannot grade it here."""

    def describe(self) -> str:
        reasons = sorted(set(self.not_ready.values()))
        text = f"ready for {len(self.ready)} instance(s)"
        if self.not_ready:
            text += f", not for {len(self.not_ready)}: " + "; ".join(reasons[:3])
            text += f" (+{len(reasons) - 3} more reasons)" if len(reasons) > 3 else ""
        return text


@dataclass(frozen=True)
class OfficialVerdict:
    """The official harness's word on one prediction."""

    instance_id: str
    status: str
    """`resolved`, `unresolved` or `error` (infrastructure: no verdict)."""
    note: str = ""
    tests_status: dict | None = None
    log_dir: str = ""


def harness_version() -> str | None:
    """The installed swebench release (the harness whose grading and parsers are used), or
    None when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("swebench")
    except PackageNotFoundError:
        return None


def docker_problem() -> str | None:
    """Why no Docker engine can be used here, or None when one answers."""
    try:
        import docker  # lazy: the docker extra, and `import evals` must stay light
    except ImportError:
        return "the docker SDK is not installed (pip install 'agentic-rl[docker]')"
    try:
        client = docker.from_env(timeout=10)
        client.ping()
        client.close()
    except Exception as exc:  # the SDK raises several unrelated types for "no daemon"
        return f"no Docker engine answers ({type(exc).__name__}: {exc})"
    return None


def missing_columns(row: dict) -> list[str]:
    """The harness columns (`HARNESS_COLUMNS`) a row lacks."""
    return [column for column in HARNESS_COLUMNS if not row.get(column)]


def check_harness(rows: list[dict], *, allow_pull: bool = False) -> HarnessCheck:
    """Per instance: can the official harness grade it on this machine?"""
    if not rows:
        return HarnessCheck()
    try:
        import swebench.harness.run_evaluation  # noqa: F401  (lazy: the swebench extra; imports docker)
        from swebench.harness.utils import make_test_spec
    except ImportError as exc:
        return HarnessCheck(not_ready={r["instance_id"]: f"the swebench package cannot load: {exc}" for r in rows})
    problem = docker_problem()
    if problem:
        return HarnessCheck(not_ready={r["instance_id"]: problem for r in rows})
    import docker

    client = docker.from_env(timeout=30)
    local = {tag for image in list_images(client) for tag in image.tags}
    client.close()
    ready: dict[str, str] = {}
    not_ready: dict[str, str] = {}
    for row in rows:
        instance = row["instance_id"]
        missing = missing_columns(row)
        if missing:
            not_ready[instance] = (
                f"the row has no {', '.join(missing)}: swebench 5 reads the instance's image and eval script "
                "from the dataset (its current revision, or a task repository), not from an older export"
            )
            continue
        try:
            image = make_test_spec(row).image
        except Exception as exc:  # a malformed row: the harness could not run it either
            not_ready[instance] = f"no TestSpec here ({type(exc).__name__}: {str(exc)[:120]})"
            continue
        if image in local or allow_pull:
            ready[instance] = image
        else:
            not_ready[instance] = f"instance image {image} is not present (docker pull it, or swebench images build)"
    return HarnessCheck(ready, not_ready)


def harness_command(
    *,
    dataset: Path,
    predictions: Path,
    instance_ids: list[str],
    run_id: str,
    max_workers: int,
    timeout_s: int,
) -> list[str]:
    """The official harness's command line: swebench 5's `swebench eval` (it keeps every
    image; 4.x's `--cache_level`/`--clean` are gone)."""
    selected = [part for instance in instance_ids for part in ("-i", instance)]
    return [
        sys.executable,
        "-c",
        HARNESS_CLI,
        "eval",
        str(dataset),
        "--predictions",
        str(predictions),
        *selected,
        "--run-id",
        run_id,
        "--workers",
        str(max_workers),
        "--timeout",
        str(timeout_s),
        "--report-dir",
        ".",
    ]


def instance_log_dir(workdir: Path, run_id: str, model: str, instance_id: str) -> Path:
    """Where the harness writes one instance's logs (its RUN_EVALUATION_LOG_DIR layout)."""
    return workdir / "logs" / "run_evaluation" / run_id / model.replace("/", "__") / instance_id


def read_report(workdir: Path, run_id: str, prediction: dict) -> OfficialVerdict:
    """The verdict the harness left for one prediction."""
    instance = prediction["instance_id"]
    log_dir = instance_log_dir(workdir, run_id, prediction["model_name_or_path"], instance)
    report_path = log_dir / "report.json"
    if report_path.exists():
        try:
            report = json.loads(report_path.read_text())[instance]
        except (json.JSONDecodeError, KeyError) as exc:
            return OfficialVerdict(instance, "error", f"{report_path}: unreadable report ({exc})", log_dir=str(log_dir))
        if report.get("infra_failure"):  # the environment broke (swebench 5's classify_logs): no verdict
            why = report.get("infra_failure_reason", "unknown")
            return OfficialVerdict(instance, "error", f"the official harness's environment failed ({why})",
                                   log_dir=str(log_dir))  # fmt: skip
        status = "resolved" if report.get("resolved") else "unresolved"
        note = "" if report.get("patch_successfully_applied") else "no usable test output (see test_output.txt)"
        return OfficialVerdict(instance, status, note, report.get("tests_status"), str(log_dir))
    instance_log = log_dir / "run_instance.log"
    text = instance_log.read_text(errors="replace") if instance_log.exists() else ""
    if APPLY_PATCH_FAIL in text:
        return OfficialVerdict(instance, "unresolved", "the patch does not apply", log_dir=str(log_dir))
    if TIMED_OUT in text:
        return OfficialVerdict(instance, "error", "the official test run timed out", log_dir=str(log_dir))
    tail = " | ".join(line.strip() for line in text.strip().splitlines()[-3:]) or "the harness left no log"
    return OfficialVerdict(instance, "error", f"official harness gave no report: {tail[:300]}", log_dir=str(log_dir))


def _forget_stale_report(workdir: Path, run_id: str, prediction: dict) -> None:
    """The harness reuses an instance's report in a run id without checking the patch: when
    the prediction changed (an errored instance solved again), drop the old logs."""
    log_dir = instance_log_dir(workdir, run_id, prediction["model_name_or_path"], prediction["instance_id"])
    patch = log_dir / "patch.diff"
    if patch.exists() and patch.read_text() != (prediction["model_patch"] or ""):
        shutil.rmtree(log_dir)


def run_harness(
    rows: list[dict],
    predictions: list[dict],
    *,
    workdir: Path,
    run_id: str,
    max_workers: int = 1,
    timeout_s: int = 1800,
) -> dict[str, OfficialVerdict]:
    """Grade `predictions` (SWE-bench format, non-empty patches) of `rows` with the official
    harness; its output goes to `workdir/harness.log`. Instances it already graded in this
    `run_id` are not run again (the harness keeps their report.json)."""
    if not predictions:
        return {}
    workdir.mkdir(parents=True, exist_ok=True)
    for prediction in predictions:
        _forget_stale_report(workdir, run_id, prediction)
    wanted = {p["instance_id"] for p in predictions}
    dataset = workdir / f"{run_id}.dataset.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows if r["instance_id"] in wanted))
    predictions_path = workdir / f"{run_id}.predictions.jsonl"
    predictions_path.write_text("".join(json.dumps(p) + "\n" for p in predictions))
    command = harness_command(
        dataset=dataset.resolve(),
        predictions=predictions_path.resolve(),
        instance_ids=sorted(wanted),
        run_id=run_id,
        max_workers=max_workers,
        timeout_s=timeout_s,
    )
    with (workdir / "harness.log").open("a") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        subprocess.run(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, check=False)
    return {p["instance_id"]: read_report(workdir, run_id, p) for p in predictions}
