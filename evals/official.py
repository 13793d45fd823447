"""SWE-bench's official harness, where it can run: a Docker engine and the instances' images.

`check_harness(rows)` says, per instance, whether the harness can grade it here. It needs
- a reachable Docker engine (the `docker` extra and a daemon);
- the instance's `TestSpec`: `swebench.harness.test_spec.make_test_spec`, which for some
  repositories (django, matplotlib, pylint, xarray, flask) downloads requirement files
  from GitHub, so without a network those instances cannot be graded officially;
- the instance image, present locally (`<namespace>/sweb.eval.<arch>.<id>:latest` as
  published, or `sweb.eval.<arch>.<id>:latest` as `swebench.harness.prepare_images`
  builds it); with `allow_pull` an absent image counts as available and the harness
  pulls it.

`run_harness(...)` runs `python -m swebench.harness.run_evaluation` (the `swebench`
package, pinned by the `swebench` extra) on a predictions file, in a working directory of
its own (the harness writes `logs/run_evaluation/<run_id>/<model>/<instance>/` under its
current directory), and `read_reports` turns those per-instance logs into verdicts:
`report.json` gives resolved or not; a patch that does not apply is unresolved (the
agent's doing); anything else without a report (an image that cannot be built or pulled, a
test run past the timeout, a crash) is an infrastructure error, never unresolved.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HARNESS_MODULE = "swebench.harness.run_evaluation"
DEFAULT_NAMESPACE = "swebench"
# Strings the harness writes in run_instance.log (swebench.harness.constants).
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
TIMED_OUT = "Test timed out after"


@dataclass(frozen=True)
class HarnessCheck:
    """Which instances the official harness can grade here, and why not the others."""

    ready: dict[str, str | None] = field(default_factory=dict)
    """instance id -> the image namespace to run it with (None: a locally built image)."""
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


def _test_spec(row: dict, namespace: str | None):
    from swebench.harness.test_spec.test_spec import make_test_spec  # lazy: the swebench extra

    return make_test_spec(row, namespace=namespace)


def check_harness(
    rows: list[dict], *, namespace: str | None = DEFAULT_NAMESPACE, allow_pull: bool = False
) -> HarnessCheck:
    """Per instance: can the official harness grade it on this machine?"""
    if not rows:
        return HarnessCheck()
    try:
        import swebench.harness.run_evaluation  # noqa: F401  (lazy: the swebench extra; imports docker)
    except ImportError as exc:
        return HarnessCheck(not_ready={r["instance_id"]: f"the swebench package cannot load: {exc}" for r in rows})
    problem = docker_problem()
    if problem:
        return HarnessCheck(not_ready={r["instance_id"]: problem for r in rows})
    import docker

    client = docker.from_env(timeout=30)
    local = {tag for image in client.images.list() for tag in image.tags}
    client.close()
    ready: dict[str, str | None] = {}
    not_ready: dict[str, str] = {}
    for row in rows:
        instance = row["instance_id"]
        candidates = dict.fromkeys([namespace, None])  # the published name first, then a local build
        keys = {}
        try:
            for candidate in candidates:
                keys[candidate] = _test_spec(row, candidate).instance_image_key
        except Exception as exc:  # network, unknown repo/version: the harness could not run it either
            not_ready[instance] = f"no TestSpec here ({type(exc).__name__}: {str(exc)[:120]})"
            continue
        found = [c for c, key in keys.items() if key in local]
        if found:
            ready[instance] = found[0]
        elif allow_pull and namespace is not None:
            ready[instance] = namespace
        else:
            not_ready[instance] = f"instance image {keys[namespace]} is not present (docker pull it, or build it)"
    return HarnessCheck(ready, not_ready)


def harness_command(
    *,
    dataset: Path,
    predictions: Path,
    instance_ids: list[str],
    run_id: str,
    namespace: str | None,
    max_workers: int,
    timeout_s: int,
) -> list[str]:
    """The official harness's command line (`python -m swebench.harness.run_evaluation`)."""
    return [
        sys.executable,
        "-m",
        HARNESS_MODULE,
        "--dataset_name",
        str(dataset),
        "--predictions_path",
        str(predictions),
        "--instance_ids",
        *instance_ids,
        "--run_id",
        run_id,
        "--namespace",
        namespace or "none",
        "--max_workers",
        str(max_workers),
        "--timeout",
        str(timeout_s),
        # Keep every image: removing one the user built or pulled would cost them hours.
        "--cache_level",
        "instance",
        "--clean",
        "false",
        "--report_dir",
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
        status = "resolved" if report.get("resolved") else "unresolved"
        note = "" if report.get("patch_successfully_applied") else "no test output (see test_output.txt)"
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
    namespace: str | None,
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
        namespace=namespace,
        max_workers=max_workers,
        timeout_s=timeout_s,
    )
    with (workdir / "harness.log").open("a") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        subprocess.run(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, check=False)
    return {p["instance_id"]: read_report(workdir, run_id, p) for p in predictions}
