"""A run's directory: what an evaluation writes as it goes, and reads back to resume.

    OUTPUT/
      run.json                 the run's settings (model, dataset, engine, grader, ...)
      results.jsonl            one record per finished instance, appended as each finishes
      predictions.jsonl        SWE-bench's format: instance_id, model_name_or_path, model_patch
      trajectories/<id>.json   transcript, patch, turns, tokens, timings, grade of one instance
      report.json / .md / .png the summary (see `evals.report`)
      quarantine.json          flaky instances (`--validate-gold`)
      official/                the official harness's working directory, when it ran

Records are appended under a lock and flushed line by line, so a killed run loses at most
the line being written; a torn last line is skipped on reading (with a warning) and that
instance simply runs again. When an instance has several records (an error retried on
resume), the last one counts.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

RESULTS, PREDICTIONS, TRAJECTORIES = "results.jsonl", "predictions.jsonl", "trajectories"
RUN_INFO, QUARANTINE = "run.json", "quarantine.json"


class RunFileError(ValueError):
    """A run's file cannot be read; the message names the file and line."""


def read_jsonl(path: Path) -> list[dict]:
    """The records of a JSONL file. A torn *last* line (a run killed mid-write) is skipped
    with a warning; a bad line anywhere else is an error naming the file and line."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                log.warning("%s:%d: skipping a torn last line (%s)", path, number, exc)
                continue
            raise RunFileError(f"{path}:{number}: not valid JSON: {exc}") from None
        if not isinstance(record, dict) or "instance_id" not in record:
            raise RunFileError(f"{path}:{number}: expected an object with an 'instance_id'")
        records.append(record)
    return records


def drop_torn_tail(path: Path) -> None:
    """Cut a torn last line (a run killed mid-write) off a JSONL file, so that appending
    does not glue the next record to it."""
    if not path.exists():
        return
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    log.warning("%s: dropping a torn last line (%d bytes)", path, len(data) - keep)
    with path.open("r+b") as f:
        f.truncate(keep)


def latest_by_instance(records: list[dict]) -> dict[str, dict]:
    """The last record of each instance, in order of first appearance."""
    latest: dict[str, dict] = {}
    for record in records:
        latest[record["instance_id"]] = record
    return latest


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that a reader never sees half a file (write, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(temporary, path)


def trajectory_name(instance_id: str) -> str:
    """A file name for an instance id (ids are names, but keep a stray '/' out of paths)."""
    return instance_id.replace(os.sep, "__") + ".json"


class RunStore:
    """Appends records, predictions and trajectories of one run directory, thread-safely."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.results_path = self.root / RESULTS
        self.predictions_path = self.root / PREDICTIONS
        self.trajectories_dir = self.root / TRAJECTORIES
        self._lock = threading.Lock()
        for path in (self.results_path, self.predictions_path):
            drop_torn_tail(path)
        # A run that predicted nothing (all errors) still has a (valid, empty) predictions file.
        self.predictions_path.touch()

    def results(self) -> dict[str, dict]:
        """The last record of every instance already in `results.jsonl`."""
        return latest_by_instance(read_jsonl(self.results_path))

    def predictions(self) -> dict[str, dict]:
        return latest_by_instance(read_jsonl(self.predictions_path))

    def _append(self, path: Path, record: dict) -> None:
        line = json.dumps(record, default=str) + "\n"
        with self._lock, path.open("a") as f:
            f.write(line)
            f.flush()

    def append_result(self, record: dict) -> None:
        self._append(self.results_path, record)

    def append_prediction(self, instance_id: str, model: str, patch: str) -> None:
        """One prediction in SWE-bench's format (`model_name_or_path` is the run's model)."""
        self._append(
            self.predictions_path, {"instance_id": instance_id, "model_name_or_path": model, "model_patch": patch}
        )

    def write_trajectory(self, instance_id: str, data: dict) -> Path:
        path = self.trajectories_dir / trajectory_name(instance_id)
        write_json_atomic(path, data)
        return path

    def compact_predictions(self, order: list[str]) -> None:
        """Rewrite `predictions.jsonl` with one line per instance (the latest), in `order`:
        the official harness reads the file whole, and a retried instance appended twice."""
        latest = self.predictions()
        if not latest:
            return
        ranked = [i for i in order if i in latest] + [i for i in latest if i not in set(order)]
        temporary = self.predictions_path.with_suffix(".jsonl.tmp")
        temporary.write_text("".join(json.dumps(latest[i]) + "\n" for i in ranked))
        with self._lock:
            os.replace(temporary, self.predictions_path)

    def write_run_info(self, info: dict) -> None:
        write_json_atomic(self.root / RUN_INFO, info)

    def run_info(self) -> dict:
        path = self.root / RUN_INFO
        return json.loads(path.read_text()) if path.exists() else {}
