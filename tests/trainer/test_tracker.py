"""`run.tracker`: MetricsWriter also sends each record's scalars (and the config, once) to wandb
or MLflow, offline under the run folder; read back here with each tracker's own API or files."""

from __future__ import annotations

import importlib.util
import json
import struct
import time

import pytest

from tests.conftest import wait_until
from trainer.config import ConfigError
from trainer.metrics import MetricsWriter

RECORDS = [
    {"step": 1, "loss": 0.5, "success_rate": 0.25, "resolved": True, "reward_hack_blocked": {"protected_files": 2}},
    {"step": 2, "loss": 0.125, "success_rate": 0.75, "episode_seconds": [1.0, 2.0], "note": "text"},
    {"step": 3, "loss": -1.5, "success_rate": 1.0, "tokens": 4096, "reward_hack_blocked": {"runner_tampered": 1}},
]
CONFIG = {"run": {"name": "t", "seed": 7, "steps": 3}, "tasks": {"ids": []}, "learner": {"lr": 0.001}}
# What the tracker must hold: the numeric fields as TensorBoard gets them (bools, lists, strings
# and `step` left out) and the grading rules tripped.
EXPECTED = {
    "train/loss": [(1, 0.5), (2, 0.125), (3, -1.5)],
    "train/success_rate": [(1, 0.25), (2, 0.75), (3, 1.0)],
    "train/tokens": [(3, 4096)],
    "reward_hack_blocked/protected_files": [(1, 2)],
    "reward_hack_blocked/runner_tampered": [(3, 1)],
}


def _missing(package: str) -> bool:
    return importlib.util.find_spec(package) is None


def _write(run_dir, tracker: str) -> None:
    writer = MetricsWriter(run_dir, tracker=tracker, project="tests", run_name="run-a", config=CONFIG)
    for record in RECORDS:
        writer.write(record)
    writer.close()


@pytest.mark.skipif(_missing("mlflow"), reason="mlflow not installed (pip install -e '.[tracking]')")
def test_mlflow_gets_every_scalar_and_the_config(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # restored after the test
    _write(tmp_path, "mlflow")

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    [run] = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
    assert run.info.run_name == "run-a" and run.info.status == "FINISHED"
    assert set(run.data.metrics) == set(EXPECTED)
    for key, points in EXPECTED.items():
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        assert history == points, key
    assert run.data.params == {"run.name": "t", "run.seed": "7", "run.steps": "3", "tasks.ids": "[]",
                               "learner.lr": "0.001"}  # fmt: skip


@pytest.mark.skipif(_missing("mlflow"), reason="mlflow not installed (pip install -e '.[tracking]')")
def test_mlflow_honours_a_tracking_uri_the_user_set(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", elsewhere.as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _write(run_dir, "mlflow")
    assert not (run_dir / "mlruns").exists()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=elsewhere.as_uri())
    [run] = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss")] == EXPECTED[
        "train/loss"
    ]


def _wandb_records(path):
    """The records of a `.wandb` file (wandb's own protobufs, in LevelDB log framing: a 7-byte
    file header, then 32 KiB blocks of chunks, each `crc32, length, kind` and its bytes)."""
    from wandb.proto import wandb_internal_pb2

    data, block, pos, parts = path.read_bytes(), 32768, 7, []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if pos + 7 + length > len(data):  # still being written
            return
        parts.append(data[pos + 7 : pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):  # FULL, LAST: a whole record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(parts))
            parts = []
            yield record


@pytest.mark.skipif(_missing("wandb"), reason="wandb not installed (pip install -e '.[tracking]')")
def test_wandb_offline_run_gets_every_scalar_and_the_config(tmp_path, monkeypatch):
    for name in ("WANDB_MODE", "WANDB_DIR", "WANDB_API_KEY", "WANDB_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    _write(tmp_path, "wandb")

    [offline] = (tmp_path / "wandb").glob("offline-run-*")
    [log] = offline.glob("*.wandb")
    # `finish()` returns before wandb's service process has written the whole log: wait for its end.
    records = wait_until(
        lambda: (found := list(_wandb_records(log))) and found[-1].WhichOneof("record_type") == "exit" and found,
        time.monotonic() + 60,
        "wandb to write the offline run's exit record",
    )
    history, updates, run = {}, [], None
    for record in records:
        kind = record.WhichOneof("record_type")
        if kind == "run":  # its config: the one the run started with
            run = record.run
            updates += list(run.config.update)
        elif kind == "history":
            step = record.history.step.num
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                if not key.startswith("_"):
                    history.setdefault(key, []).append((step, json.loads(item.value_json)))
        elif kind == "config":  # changes made to it later, if any
            updates += list(record.config.update)
    config = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in updates}
    assert run.project == "tests" and run.display_name == "run-a"
    assert history == EXPECTED
    assert {key: config[key] for key in CONFIG} == CONFIG


def test_a_tracker_that_is_not_installed_is_one_line_before_anything_is_written(tmp_path, monkeypatch):
    for package in ("wandb", "mlflow"):
        monkeypatch.setitem(__import__("sys").modules, package, None)  # as if not installed
        with pytest.raises(ConfigError) as caught:
            MetricsWriter(tmp_path, tracker=package)
        pip = "mlflow-skinny" if package == "mlflow" else "wandb"
        assert str(caught.value) == f"run.tracker={package} needs the {package} package: pip install {pip}"
    assert list(tmp_path.iterdir()) == []


def test_no_tracker_by_default(tmp_path):
    writer = MetricsWriter(tmp_path)
    writer.write(RECORDS[0])
    writer.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl", "tensorboard"]
