"""The layers: importing the lower packages pulls in no heavy dependency, and no lower
layer imports a higher one.

From the bottom: `sandboxes` < `tasks` < `agent_env` < `trainer.inference` < `trainer`
(learner, orchestrator, recipes) and `evals` side by side. `evals` stands on the inference
layer and never on training. Command-line entry points (`__main__.py`) compose layers by
design and may import any of them; nothing imports an entry point.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
HEAVY = ("torch", "ray", "docker", "vllm", "transformers", "datasets")
# Which first-party layers each layer may import. A layer is a package, or a sub-package
# named here (`trainer.inference`): the most specific name that matches a module wins.
ALLOWED = {
    "sandboxes": {"sandboxes"},
    "tasks": {"tasks", "sandboxes"},
    "agent_env": {"agent_env", "sandboxes", "tasks"},
    "trainer.inference": {"trainer.inference", "agent_env", "sandboxes", "tasks"},
    "trainer": {"trainer", "trainer.inference", "agent_env", "sandboxes", "tasks"},
    "evals": {"evals", "trainer.inference", "agent_env", "sandboxes", "tasks"},
}


def layer_of(module: str) -> str | None:
    """The layer a dotted module name belongs to (None: not first-party)."""
    for layer in sorted(ALLOWED, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def imports_of(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from trainer import distributed` imports trainer.distributed.
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def test_layer_of_picks_the_most_specific_layer():
    assert layer_of("trainer.inference.engines.hf") == "trainer.inference"
    assert layer_of("trainer.learner") == "trainer"
    assert layer_of("trainer.inferences") == "trainer"
    assert layer_of("evals.swe") == "evals"
    assert layer_of("torch") is None


def test_importing_env_and_sandboxes_imports_nothing_heavy():
    code = (
        f"import sys, agent_env, sandboxes, tasks, evals.swe\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


def test_importing_the_inference_layer_pulls_in_no_learner_ray_or_fsdp():
    code = (
        "import sys, trainer.inference, trainer.inference.engines, trainer.inference.rollout, "
        "trainer.inference.trajectory, trainer.inference.models, trainer.inference.engines.hf, evals.swe, evals.runner\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'ray' or m.startswith('torch.distributed.fsdp') "
        "or (m.startswith('trainer.') and not m.startswith('trainer.inference'))]\n"
        "print(','.join(sorted(bad)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_no_layer_imports_a_higher_one(layer):
    folder = ROOT.joinpath(*layer.split("."))
    offenders = []
    for path in folder.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        # Task data is not code of the house; entry points compose layers by design.
        if "builtin" in path.parts or path.name == "__main__.py" or layer_of(module) != layer:
            continue
        for name in imports_of(path):
            target = layer_of(name)
            if target is not None and target not in ALLOWED[layer]:
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
            if name.endswith("__main__"):
                offenders.append(f"{path.relative_to(ROOT)} imports the entry point {name}")
    assert not offenders


LONG_FILE_LINES = 450
LONG_FILE_REASON = "Over 450 lines on purpose:"


def long_files_without_a_reason(paths: list[Path]) -> list[str]:
    """Files over `LONG_FILE_LINES` lines whose module docstring does not say why (issue
    #34): a long file is either split or says, in `LONG_FILE_REASON` words, what keeps it
    whole."""
    offenders = []
    for path in paths:
        source = path.read_text()
        if source.count("\n") <= LONG_FILE_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(source)) or ""
        if LONG_FILE_REASON not in docstring:
            offenders.append(f"{path.relative_to(ROOT)} ({source.count(chr(10))} lines)")
    return offenders


def test_the_long_file_check_names_a_long_file_without_a_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    short = tmp_path / "short.py"
    short.write_text('"""Short."""\n' + "x = 1\n" * 10)
    silent = tmp_path / "silent.py"
    silent.write_text('"""Long."""\n' + "x = 1\n" * LONG_FILE_LINES)
    argued = tmp_path / "argued.py"
    argued.write_text(f'"""Long.\n\n{LONG_FILE_REASON} one table.\n"""\n' + "x = 1\n" * LONG_FILE_LINES)
    assert long_files_without_a_reason([short, silent, argued]) == [f"silent.py ({LONG_FILE_LINES + 1} lines)"]


def test_every_long_module_says_why_it_is_long():
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    # Tests and the fixtures recorded from real runs are data as much as code.
    paths = [ROOT / p for p in tracked if not p.startswith("tests/") and (ROOT / p).is_file()]
    assert long_files_without_a_reason(paths) == []
