"""The layers: importing the lower packages pulls in no heavy dependency, and no lower
layer imports a higher one."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
HEAVY = ("torch", "ray", "docker", "vllm", "transformers", "datasets")
# Which first-party packages each package may import.
ALLOWED = {
    "sandboxes": {"sandboxes"},
    "tasks": {"tasks"},
    "agent_env": {"agent_env", "sandboxes", "tasks"},
    "trainer": {"trainer", "agent_env", "sandboxes", "tasks"},
    "evals": {"evals", "trainer", "agent_env", "sandboxes", "tasks"},
}


def test_importing_env_and_sandboxes_imports_nothing_heavy():
    code = (
        f"import sys, agent_env, sandboxes, tasks, evals.swe\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_layer_imports_a_higher_one(package):
    offenders = []
    for path in (ROOT / package).rglob("*.py"):
        # Task data, and command-line entry points, which compose layers by design.
        if "builtin" in path.parts or path.name == "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in ALLOWED and top not in ALLOWED[package]:
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders
    # evals may use trainer's engines and rollout, never the learner.
    if package == "evals":
        text = "\n".join(p.read_text() for p in (ROOT / "evals").rglob("*.py"))
        assert "trainer.learner" not in text
