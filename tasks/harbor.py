"""Harbor task folders as tasks: `harbor:PATH` (a task folder, or a folder of them).

A Harbor task (the format of the `harbor` package, grown out of Terminal-Bench) is a folder:
`task.toml` (timeouts, resources, metadata), `instruction.md` (what the agent is asked),
`environment/Dockerfile` (the sandbox), `tests/test.sh` (the verifier: it writes a reward to
`/logs/verifier/reward.txt` or `reward.json`) and, optionally, `solution/solve.sh` (the oracle).

What each part becomes here (tasks/README.md, "Harbor tasks"):
- `instruction.md` is the problem statement; `[agent].timeout_sec` and
  `[verifier].timeout_sec` bound the commands and the verifier run.
- `environment/Dockerfile` is the sandbox: the docker backend builds it (`sandboxes.dockerfile`)
  and the agent works in a copy of its WORKDIR; the local backend runs it on the host's
  toolchain when it only copies files, sets variables and a workdir (a `RUN` step needs the
  docker backend, and the task says so). The workspace the agent's diff is taken against is
  the WORKDIR as the Dockerfile's `COPY` steps leave it.
- `tests/` is a `ScriptVerifier`: it reaches a fresh grading sandbox only after the agent
  has finished, and the reward file it leaves is the reward (`agent_env.grading.script_verifier`,
  which also says how what the agent writes is kept from deciding it). Non-binary rewards are
  kept.
- `solution/solve.sh` is the gold: `agent_env validate` runs it in a sandbox of the task and
  grades the diff it leaves, as Harbor's oracle agent does.

This module only reads folders (errors name the file and the field); building and running
happen above it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tasks.spec import GradingSpec, LimitsSpec, ScriptVerifier, Task, TaskError, workspace_cache_dir

PREFIX = "harbor:"
VERIFIER_SCRIPT = "test.sh"
SOLUTION_SCRIPT = "solve.sh"
DEFAULT_AGENT_TIMEOUT_S = 600.0
DEFAULT_VERIFIER_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Dockerfile:
    """What the local backend and the workspace need of a Dockerfile: its base image, final
    WORKDIR, ENV, USER, the COPY/ADD steps ((source in the build context, destination)) and
    the RUN steps, in order."""

    base: str
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    copies: tuple[tuple[str, str], ...] = ()
    runs: tuple[str, ...] = ()
    user: str | None = None


def harbor_path(source: str) -> Path | None:
    """The folder a `harbor:PATH` source names, else None."""
    return Path(source[len(PREFIX) :]).expanduser() if source.startswith(PREFIX) else None


def is_harbor_task(folder: Path) -> bool:
    return (folder / "task.toml").is_file()


def task_folders(root: Path) -> list[Path]:
    """`root` itself when it is a Harbor task, else every task folder directly inside it
    (sorted); a one-line `TaskError` when there is none."""
    if not root.is_dir():
        raise TaskError(f"harbor:{root}: no such folder; give a Harbor task folder or a folder of them")
    if is_harbor_task(root):
        return [root]
    folders = sorted(p for p in root.iterdir() if p.is_dir() and is_harbor_task(p))
    if not folders:
        raise TaskError(f"harbor:{root}: no Harbor task here (a task folder holds task.toml, instruction.md, tests/)")
    return folders


def load_harbor_tasks(root: Path) -> list[Task]:
    """Every Harbor task under `root` (`task_folders`) as a `Task`."""
    tasks = [load_harbor_task(folder) for folder in task_folders(root)]
    seen: dict[str, Path] = {}
    for task in tasks:
        if task.id in seen:
            raise TaskError(f"harbor:{root}: two tasks are named {task.id!r} ({seen[task.id]} and {task.source})")
        seen[task.id] = Path(task.source)
    return tasks


def _table(config: dict, name: str, where: Path) -> dict:
    value = config.get(name, {})
    if not isinstance(value, dict):
        raise TaskError(f"{where}: field '{name}': must be a table ([{name}])")
    return value


def _seconds(table: dict, key: str, default: float, where: Path, section: str) -> float:
    value = table.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TaskError(f"{where}: field '{section}.{key}': must be a positive number of seconds, not {value!r}")
    return float(value)


def _env(table: dict, where: Path, section: str) -> dict[str, str]:
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, (str, int, float)) for v in env.values()):
        raise TaskError(f"{where}: field '{section}.env': must be a table of names to strings")
    return {str(k): str(v) for k, v in env.items()}


def task_name(folder: Path, config: dict) -> str:
    """The task's id: `[task].name` with its organisation (`org/name` -> `org__name`), else the
    folder's name."""
    name = config.get("task", {}).get("name") if isinstance(config.get("task"), dict) else None
    return str(name).replace("/", "__") if name else folder.name


def load_harbor_task(folder: Path) -> Task:
    """One Harbor task folder as a `Task`; errors name the file and the field."""
    folder = folder.resolve()
    toml_path = folder / "task.toml"
    try:
        config = tomllib.loads(toml_path.read_text())
    except OSError as exc:
        raise TaskError(f"{toml_path}: cannot be read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{toml_path}: not valid TOML ({exc})") from None
    instruction_path = folder / "instruction.md"
    if not instruction_path.is_file() or not instruction_path.read_text().strip():
        raise TaskError(f"{instruction_path}: missing or empty; it is what the agent is asked to do")
    tests = folder / "tests"
    if not (tests / VERIFIER_SCRIPT).is_file():
        raise TaskError(f"{tests / VERIFIER_SCRIPT}: missing; the verifier script writes /logs/verifier/reward.txt")
    verifier, agent, environment = (_table(config, name, toml_path) for name in ("verifier", "agent", "environment"))
    dockerfile_path = folder / "environment" / "Dockerfile"
    image = environment.get("docker_image")
    if not dockerfile_path.is_file() and not image:
        raise TaskError(f"{folder / 'environment'}: no Dockerfile (and no [environment].docker_image in {toml_path})")
    name = task_name(folder, config)
    sandbox: dict = {"env": _env(environment, toml_path, "environment")}
    if dockerfile_path.is_file():
        dockerfile = parse_dockerfile(dockerfile_path)
        workdir = environment.get("workdir") or dockerfile.workdir
        sandbox["env"] = {**dockerfile.env, **sandbox["env"]}
        workspace = copied_workspace(dockerfile, folder / "environment", workdir)
    else:
        workdir = environment.get("workdir") or "/app"
        sandbox["image"] = image
        workspace = _empty_workspace()
    sandbox["workdir"] = workdir
    sandbox["network"] = environment.get("network_mode", "public") != "no-network" and bool(
        environment.get("allow_internet", True)
    )
    solution = folder / "solution"
    command_timeout = _seconds(agent, "timeout_sec", DEFAULT_AGENT_TIMEOUT_S, toml_path, "agent")
    verifier_timeout = _seconds(verifier, "timeout_sec", DEFAULT_VERIFIER_TIMEOUT_S, toml_path, "verifier")
    return Task(
        id=name,
        problem_statement=instruction_path.read_text().strip(),
        grading=GradingSpec(test_command=f"/tests/{VERIFIER_SCRIPT}", log_parser="pytest", fail_to_pass=["reward"]),
        limits=LimitsSpec(
            max_turns=50, command_timeout_s=min(command_timeout, 600.0), grading_timeout_s=verifier_timeout
        ),
        family=str(config.get("metadata", {}).get("category", "harbor"))
        if isinstance(config.get("metadata"), dict)
        else "harbor",
        difficulty=_difficulty(config),
        workspace=workspace,
        source=str(toml_path),
        sandbox=sandbox,
        dockerfile=dockerfile_path if dockerfile_path.is_file() else None,
        verifier=ScriptVerifier(
            tests_dir=tests,
            timeout_s=verifier_timeout,
            env=_env(verifier, toml_path, "verifier"),
            solution_dir=solution if (solution / SOLUTION_SCRIPT).is_file() else None,
        ),
    )


def _difficulty(config: dict) -> str:
    metadata = config.get("metadata", {}) if isinstance(config.get("metadata"), dict) else {}
    value = str(metadata.get("difficulty", "medium")).lower()
    return value if value in ("easy", "medium", "hard") else "medium"


# -- the Dockerfile -----------------------------------------------------------------------


def _logical_lines(text: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current.strip():
        lines.append(current)
    return lines


def _env_pairs(rest: str) -> dict[str, str]:
    words = shlex.split(rest)
    if words and "=" not in words[0]:  # the legacy form: ENV NAME value with spaces
        return {words[0]: " ".join(words[1:])}
    return dict(word.split("=", 1) for word in words if "=" in word)


def parse_dockerfile(path: Path) -> Dockerfile:
    """The parts of a Dockerfile that tasks use (`Dockerfile`); a one-line `TaskError` naming
    the line for what cannot be read (several FROM stages, COPY --from, a URL in ADD)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise TaskError(f"{path}: cannot be read ({exc.strerror})") from None
    base, workdir, env, copies, runs, user = "", "/", {}, [], [], None
    for line in _logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            if base:
                raise TaskError(
                    f"{path}: several FROM stages; give the task one stage (a multi-stage build is not read)"
                )
            base = rest.split()[0] if rest else ""
        elif keyword == "WORKDIR":
            workdir = rest if rest.startswith("/") else os.path.normpath(os.path.join(workdir, rest))
        elif keyword == "ENV":
            env.update(_env_pairs(rest))
        elif keyword in ("COPY", "ADD"):
            words = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
            flags = [w for w in words if w.startswith("--")]
            words = [w for w in words if not w.startswith("--")]
            if any(f.startswith("--from") for f in flags):
                raise TaskError(f"{path}: {keyword} --from: a multi-stage build is not read")
            if len(words) < 2 or any("://" in w for w in words[:-1]):
                raise TaskError(f"{path}: {line!r}: {keyword} needs local sources and a destination")
            dest = words[-1]
            into_folder = dest.endswith("/") or dest in (".", "./") or len(words) > 2
            dest = os.path.normpath(dest if dest.startswith("/") else os.path.join(workdir, dest))
            copies += [(source, dest + "/" if into_folder else dest) for source in words[:-1]]
        elif keyword == "RUN":
            runs.append(rest)
        elif keyword == "USER":
            user = rest
    if not base:
        raise TaskError(f"{path}: no FROM line")
    return Dockerfile(base, workdir, env, tuple(copies), tuple(runs), user)


def local_problem(dockerfile: Dockerfile, workdir: str) -> str:
    """What keeps the local backend (the host's toolchain, the workspace copied in) from
    running a Dockerfile's sandbox as it is: RUN steps, files copied outside the workdir, a
    user to switch to; "" when nothing does."""
    problems = []
    if dockerfile.runs:
        problems.append(f"its {len(dockerfile.runs)} RUN step(s) need the docker backend (--sandbox docker)")
    root = os.path.normpath(workdir)
    outside = [d for _, d in dockerfile.copies if not _within(os.path.normpath(d), root)]
    if outside:
        problems.append(f"COPY to {', '.join(outside)}, outside the workdir {root}, needs the docker backend")
    return "; ".join(problems)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def copied_workspace(dockerfile: Dockerfile, context: Path, workdir: str) -> Path:
    """The WORKDIR as the Dockerfile's COPY steps leave it (Docker's rules: a folder's
    contents go into the destination; a file goes into a destination that ends in `/` or is
    the workdir, else becomes it), made once in the workspace cache. Copies elsewhere are left
    out (`local_problem` names them)."""
    root = os.path.normpath(workdir)
    context = context.resolve()
    inside: list[tuple[Path, str]] = []  # (source, destination relative to the workdir)
    for source, dest in dockerfile.copies:
        src = (context / source).resolve()
        if not src.is_relative_to(context) or not src.exists():
            raise TaskError(f"{context / 'Dockerfile'}: COPY {source}: no such file in the build context {context}")
        target = os.path.normpath(dest)
        if not _within(target, root):
            continue
        rel = os.path.relpath(target, root)
        rel = "" if rel == "." else rel
        if src.is_file() and (dest.endswith("/") or target == root):
            rel = os.path.join(rel, src.name)
        inside.append((src, rel))
    digest = hashlib.sha256(repr((root, [(str(s), d) for s, d in inside])).encode())
    for src, _ in inside:
        for file in sorted(src.rglob("*")) if src.is_dir() else [src]:
            if file.is_file():
                digest.update(str(file).encode() + b"\0" + file.read_bytes())
    target_dir = workspace_cache_dir() / "harbor" / digest.hexdigest()[:20]
    if not target_dir.is_dir():
        staging = target_dir.with_name(f"{target_dir.name}.tmp{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for src, rel in inside:
            if src.is_dir():
                shutil.copytree(src, staging / rel, dirs_exist_ok=True)
            else:
                (staging / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, staging / rel)
        try:
            staging.rename(target_dir)
        except OSError:  # another process published it first
            shutil.rmtree(staging, ignore_errors=True)
    return target_dir


def _empty_workspace() -> Path:
    target = workspace_cache_dir() / "harbor" / "empty"
    target.mkdir(parents=True, exist_ok=True)
    return target
