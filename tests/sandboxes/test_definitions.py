"""Sandbox definitions (YAML): parsing, the errors bad files get, and the content hash."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sandboxes.base import DEFAULT_IMAGE, SandboxLimits
from sandboxes.images import (
    BuildRecipe,
    Debootstrap,
    DefinitionError,
    content_hash,
    load_definition,
)

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "def.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_shipped_base_definition_loads():
    definition = load_definition(ROOT / "sandboxes" / "images" / "base.yaml")
    assert definition.image_name == DEFAULT_IMAGE
    assert {"python3", "git"} <= set(definition.build.debootstrap.include)
    assert definition.build.user == "sandbox"


def test_full_definition_becomes_a_spec(tmp_path):
    (tmp_path / "files").mkdir()
    path = write(
        tmp_path,
        """
        image: swebench/sweb.eval.x86_64.django_1776_django-11099:latest
        workspace: files
        workdir: /testbed
        env: {A: 1}
        network: false
        user: root
        limits: {timeout_s: 60, pids: 128, memory_bytes: 2G, tmp_bytes: 256M, cpus: 1}
        """,
    )
    spec = load_definition(path).spec()
    assert spec.image == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert spec.workspace == (tmp_path / "files").resolve() and spec.workdir == "/testbed"
    assert spec.env == {"A": "1"} and spec.user == "root"
    assert spec.limits == SandboxLimits(timeout_s=60.0, pids=128, memory_bytes=2 << 30, tmp_bytes=256 << 20, cpus=1.0)


def test_defaults_are_backwards_compatible(tmp_path):
    spec = load_definition(write(tmp_path, "{}\n")).spec()
    assert spec.limits == SandboxLimits() and spec.image == DEFAULT_IMAGE and spec.workspace is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("limits: {pids: many}\n", r"def\.yaml: field 'limits\.pids': Input should be a valid integer"),
        ("limits: {memroy_bytes: 1G}\n", r"def\.yaml: field 'limits\.memroy_bytes': unknown field"),
        ("limits: {memory_bytes: lots}\n", r"field 'limits\.memory_bytes': expected a size"),
        ("imag: x\n", r"def\.yaml: field 'imag': unknown field"),
        ("path: /elsewhere.yaml\n", r"def\.yaml: field 'path': unknown field"),
        ("image: x\nbuild: {base: y}\n", "either image or build"),
        ("build: {setup: [echo]}\n", "exactly one of base or debootstrap"),
        ("build: {base: x, setup: [true]}\n", r"field 'build\.setup\.0': Input should be a valid string"),
        ("build: {base: x, setup: echo}\n", r"field 'build\.setup': Input should be a valid tuple"),
        ("workspace: nowhere\n", r"field 'workspace': .*nowhere is not a directory"),
        ("workdir: relative\n", "field 'workdir': must be an absolute path"),
        ("network: yes please\n", r"field 'network': Input should be a valid boolean"),
        ("- a list\n", "def.yaml: expected a mapping of fields, got list"),
        ("image: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_definitions_name_the_file_and_field(tmp_path, text, message):
    with pytest.raises(DefinitionError, match=message):
        load_definition(write(tmp_path, text))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(DefinitionError, match="nope.yaml: cannot read"):
        load_definition(tmp_path / "nope.yaml")


def test_sizes(tmp_path):
    # Sizes are read where a definition holds them (`limits`): binary units, or bytes.
    for given, want in (("512M", 512 << 20), ("1.5GiB", 3 << 29), (4096, 4096)):
        definition = load_definition(write(tmp_path, f"image: {DEFAULT_IMAGE}\nlimits:\n  memory_bytes: {given}\n"))
        assert definition.limits.memory_bytes == want
    with pytest.raises(DefinitionError, match=r"limits\.memory.*expected a size such as 4096, 512M or 4G"):
        load_definition(write(tmp_path, f"image: {DEFAULT_IMAGE}\nlimits:\n  memory_bytes: 12 parsecs\n"))


def test_content_hash_follows_the_recipe_not_the_mirror():
    recipe = BuildRecipe(debootstrap=Debootstrap(), setup=("echo a",))
    same = BuildRecipe(debootstrap=Debootstrap(mirror="http://mirror.example/debian"), setup=("echo a",))
    assert content_hash(recipe, None) == content_hash(same, None)
    assert content_hash(recipe, None) != content_hash(BuildRecipe(debootstrap=Debootstrap(), setup=("echo b",)), None)
    on_base = BuildRecipe(base="img", setup=("echo a",))
    assert content_hash(on_base, "sha256:1") != content_hash(on_base, "sha256:2")  # a rebuilt base


def test_cli_reports_errors_without_a_traceback(tmp_path):
    path = write(tmp_path, "image: agentic-rl/base:bookworm\n")
    result = subprocess.run(
        [sys.executable, "-m", "sandboxes", "build", str(path)], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and "nothing to build" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_reap_runs():
    result = subprocess.run([sys.executable, "-m", "sandboxes", "reap"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.startswith("reaped ")
