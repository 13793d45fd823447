"""Checkpoints that verify themselves: every kind of file of the newest checkpoint truncated,
changed by one byte or deleted makes `resume=auto` fall back to the one before, naming the
file; the loader refuses a damaged export; a driver killed between the ranks' write and its
publish leaves no visible checkpoint. Real checkpoints of the tiny learner, written once
per module and copied per case."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.checkpoints import latest_checkpoint
from trainer.inference.manifest import MANIFEST, ManifestError, problems, verify, write_manifest

REPO = Path(__file__).resolve().parents[2]

# Each kind of file a checkpoint holds (the DCP shard name is found in the fixture).
KINDS = ["dcp/SHARD", "dcp/.metadata", "state.json", "policy/model.safetensors", "policy/tokenizer.json",
         "policy/tokenizer_config.json", "policy/manifest.json", "manifest.json"]  # fmt: skip
DAMAGES = ["truncate", "flip", "delete"]


def _learner():
    from tests.trainer.test_learner import make_learner, make_trajectory
    from trainer.inference.models import ValueModel, load_policy, load_tokenizer

    policy = load_policy("tiny", seed=0)
    learner = make_learner(policy, ValueModel.from_policy(policy), lr=1e-3, critic_lr=1e-3)
    return learner, load_tokenizer("tiny"), lambda seed: learner.step([make_trajectory(learner.policy, 1.0, seed)])


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A run folder with two real checkpoints, step_000001 and step_000002."""
    learner, tokenizer, step = _learner()
    root = tmp_path_factory.mktemp("run")
    for number in (1, 2):
        step(number)
        learner.save(root / "checkpoints" / f"step_{number:06d}", extra={"step": number}, tokenizer=tokenizer)
    return root


def _file(checkpoint: Path, kind: str) -> Path:
    if kind == "dcp/SHARD":
        return sorted((checkpoint / "dcp").glob("*.distcp"))[0]
    return checkpoint / kind


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif how == "flip":
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    else:
        path.unlink()


def test_a_written_checkpoint_lists_every_file_and_verifies(run):
    checkpoint = run / "checkpoints" / "step_000002"
    listed = json.loads((checkpoint / MANIFEST).read_text())["files"]
    on_disk = sorted(p.relative_to(checkpoint).as_posix() for p in checkpoint.rglob("*") if p.is_file())
    assert sorted(listed) == [n for n in on_disk if n != MANIFEST]
    assert {"state.json", "dcp/.metadata", "policy/model.safetensors", "policy/manifest.json"} <= set(listed)
    assert listed["state.json"]["size"] == (checkpoint / "state.json").stat().st_size
    assert problems(checkpoint) == [] and problems(checkpoint / "policy") == []
    assert latest_checkpoint(run) == checkpoint
    assert not list((run / "checkpoints").glob(".*"))  # no staging folder left behind


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", KINDS)
def test_resume_auto_falls_back_past_a_damaged_file_and_names_it(run, tmp_path, caplog, kind, how):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    newest = copy / "checkpoints" / "step_000002"
    damaged = _file(newest, kind)
    _damage(damaged, how)
    with caplog.at_level(logging.WARNING, logger="trainer.checkpoints"):
        assert latest_checkpoint(copy) == copy / "checkpoints" / "step_000001"
    lines = [r.getMessage() for r in caplog.records if r.name == "trainer.checkpoints"]
    assert len(lines) == 1 and lines[0].startswith("skipping checkpoint step_000002: ")
    if kind == "manifest.json" and how == "flip":
        # One byte of the manifest changed: whichever entry it falls in no longer matches.
        assert str(newest) in lines[0]
    else:
        assert f"{damaged}: " in lines[0], lines[0]
        expected = {"truncate": "bytes, the manifest says", "flip": "sha256 differs", "delete": "missing"}[how]
        if kind == "manifest.json" and how == "truncate":
            expected = "unreadable"
        assert expected in lines[0], lines[0]
    with pytest.raises(ManifestError) as error:
        verify(newest)
    assert str(newest) in str(error.value)


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", ["policy/model.safetensors", "policy/tokenizer.json", "policy/manifest.json"])
def test_the_loader_refuses_a_damaged_export_naming_the_file(run, tmp_path, kind, how):
    from trainer.inference.models import load_policy

    copy = tmp_path / "step_000002"
    shutil.copytree(run / "checkpoints" / "step_000002", copy)
    _damage(copy / kind, how)
    with pytest.raises(ManifestError) as error:
        load_policy(str(copy / "policy"))
    if kind == "policy/manifest.json" and how == "flip":  # whichever entry the byte fell in
        assert error.value.path.parent == copy / "policy"
    else:
        assert error.value.path == copy / kind


def test_an_intact_export_loads_and_an_extra_file_is_damage(run, tmp_path):
    from trainer.inference.models import load_policy

    assert load_policy(str(run / "checkpoints" / "step_000002" / "policy")).config.vocab_size > 0
    copy = tmp_path / "policy"
    shutil.copytree(run / "checkpoints" / "step_000002" / "policy", copy)
    (copy / "model-00002-of-00002.safetensors").write_bytes(b"x")
    assert [(p.file, p.reason) for p in problems(copy)] == [("model-00002-of-00002.safetensors", "not in the manifest")]
    # An export copied out of its checkpoint still carries its manifest and is checked too.
    alone = tmp_path / "alone"
    shutil.copytree(run / "checkpoints" / "step_000002" / "policy", alone)
    (alone / "tokenizer.json").write_text("{}")
    with pytest.raises(ManifestError, match="tokenizer.json: .*the manifest says"):
        load_policy(str(alone))


def test_manifest_functions_on_a_small_folder(tmp_path):
    folder = tmp_path / "f"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("hello")
    (folder / "sub" / "b.bin").write_bytes(b"\x00\x01")
    write_manifest(folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["files"]["a.txt"] == {
        "size": 5,
        "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
    }
    assert sorted(manifest["files"]) == ["a.txt", "sub/b.bin"] and not list(folder.glob(".*"))
    assert problems(folder) == []
    (folder / "sub" / "b.bin").write_bytes(b"\x00\x02")
    (folder / "a.txt").unlink()
    assert [(p.file, p.reason) for p in problems(folder)] == [
        ("a.txt", "missing"),
        ("sub/b.bin", "sha256 differs from the manifest (the content changed)"),
    ]
    (folder / MANIFEST).unlink()
    assert [p.file for p in problems(folder)] == [MANIFEST]
    assert [p.reason for p in problems(tmp_path / "nowhere")] == ["no such folder"]


def test_verify_command_prints_ok_or_the_first_bad_file(run, tmp_path, capsys):
    from trainer.checkpoints import main

    checkpoint = run / "checkpoints" / "step_000001"
    assert main(["verify", str(checkpoint)]) == 0
    files = len(json.loads((checkpoint / MANIFEST).read_text())["files"])
    assert capsys.readouterr().out == f"ok: {checkpoint} ({files} files)\n"
    copy = tmp_path / "step_000001"
    shutil.copytree(checkpoint, copy)
    (copy / "state.json").write_text("{}")
    assert main(["verify", str(copy)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"damaged: {copy / 'state.json'}: ") and out.count("\n") == 1


@pytest.mark.signals
def test_an_explicit_resume_of_a_damaged_checkpoint_is_one_line(run, tmp_path):
    from trainer.train import main

    copy = tmp_path / "step_000002"
    shutil.copytree(run / "checkpoints" / "step_000002", copy)
    _damage(copy / "state.json", "flip")
    with pytest.raises(SystemExit) as stop:
        main([f"run.output_dir={tmp_path}", "run.name=resumed", f"run.resume={copy}"])
    assert stop.value.code == f"trainer.train: damaged: {copy / 'state.json'}: sha256 differs from the manifest " \
        "(the content changed)"  # fmt: skip


DIES_BEFORE_PUBLISH = """
import os, signal, sys
from pathlib import Path
from tests.trainer.test_checkpoint_manifest import _learner
from trainer.learner import checkpoint

learner, tokenizer, step = _learner()
step(3)
directory = Path(sys.argv[1]) / "checkpoints" / "step_000003"
checkpoint.prepare(directory)
checkpoint.write(learner, directory, {"step": 3}, tokenizer)  # the ranks' shards, written
os.kill(os.getpid(), signal.SIGKILL)  # the driver dies before it publishes
"""


@pytest.mark.slow
def test_a_driver_killed_between_the_shards_and_the_publish_leaves_no_visible_checkpoint(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    result = subprocess.run([sys.executable, "-c", DIES_BEFORE_PUBLISH, str(copy)], cwd=REPO, capture_output=True)
    assert result.returncode == -9, result.stderr.decode()[-2000:]
    staging = copy / "checkpoints" / ".step_000003.partial"
    assert (staging / "state.json").is_file() and (staging / "policy" / "model.safetensors").is_file()
    assert not (staging / MANIFEST).exists() and not (copy / "checkpoints" / "step_000003").exists()
    assert latest_checkpoint(copy) == copy / "checkpoints" / "step_000002"
