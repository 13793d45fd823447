"""Our sandboxes as a Harbor environment: `harbor run -e agent_env.harbor_provider:SandboxEnvironment`.

Harbor (the `harbor` package, in a Python 3.12 venv of its own: `make harbor-venv`) runs a
trial through an environment provider: start a sandbox from the task's `environment/`, exec
commands in it, upload the solution and tests, download the logs. This provider does it
with our local (bubblewrap) or docker backend (`--ek backend=docker`), so `harbor run`
works where Harbor's own docker environment cannot (it needs the `docker compose` v2 plugin,
which Debian does not package):

    PYTHONPATH=$PWD .venv-harbor/bin/harbor run -p harbor-tasks/ -a oracle \\
        -e agent_env.harbor_provider:SandboxEnvironment --ek backend=local

How Harbor's calls map onto a sandbox (`sandboxes.Sandbox`):
- `start`: the Dockerfile is read as `tasks.harbor` reads it (docker: built into an image by
  `sandboxes.dockerfile`; local: its COPY steps give the workdir, and RUN steps refuse); the
  sandbox gets host folders bound at `/logs/agent`, `/logs/verifier`, `/logs/artifacts`,
  `/tests` and `/solution` (the paths Harbor writes to outside the workdir), which the
  host reads and writes directly;
- `exec`: a fresh `bash -c` in the sandbox, in `cwd` (default: the workdir) with `env`; the
  user is the sandbox's own (`user` is not switched: the local backend has one user);
- `upload_*` / `download_*`: host copies for the bound folders, the sandbox's file calls
  (a tar stream for folders) elsewhere;
- `stop`: the sandbox closed (every process in it killed) and its folders removed.
"""

from __future__ import annotations

import asyncio
import io
import os
import shlex
import shutil
import tarfile
import tempfile
from pathlib import Path

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities

from sandboxes import Mount, SandboxSpec, make_sandbox
from tasks.harbor import copied_workspace, local_problem, parse_dockerfile

BOUND = ("/logs/agent", "/logs/verifier", "/logs/artifacts", "/tests", "/solution")
"""Folders Harbor uses outside the workdir: bound from the host, written and read there."""


class SandboxEnvironment(BaseEnvironment):
    """A Harbor environment over an agentic-rl sandbox (`backend`: local or docker)."""

    def __init__(self, *args, backend: str = "local", **kwargs) -> None:
        if backend not in ("local", "docker"):
            raise ValueError(f"--ek backend={backend}: give local or docker")
        self.backend = backend
        self._sandbox = None
        self._host: Path | None = None
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return "agentic-rl"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        # Our sandboxes have no network (SandboxSpec.network is off): a no-network task is
        # enforced; a public one runs offline too.
        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self) -> None:
        if not (Path(self.environment_dir) / "Dockerfile").is_file():
            raise FileNotFoundError(f"{self.environment_dir}: no Dockerfile (this provider builds from one)")

    # -- life cycle -------------------------------------------------------------------------

    def _spec(self) -> SandboxSpec:
        dockerfile_path = Path(self.environment_dir) / "Dockerfile"
        dockerfile = parse_dockerfile(dockerfile_path)
        workdir = self.task_env_config.workdir or dockerfile.workdir
        image = None
        if self.backend == "docker":
            from sandboxes import dockerfile as images

            image = images.build(dockerfile_path)
        elif problem := local_problem(dockerfile, workdir):
            raise RuntimeError(f"{dockerfile_path}: on the local backend, {problem}")
        assert self._host is not None
        mounts = []
        for target in BOUND:
            folder = self._host / target.strip("/").replace("/", "_")
            folder.mkdir(parents=True)
            folder.chmod(0o777)  # the sandbox's user writes there
            mounts.append(Mount(folder, target, writable=True))
        return SandboxSpec(
            workspace=copied_workspace(dockerfile, dockerfile_path.parent, workdir),
            workdir=workdir,
            env={**dockerfile.env, **self.task_env_config.env},
            image=image,
            mounts=tuple(mounts),
        )

    async def start(self, force_build: bool) -> None:
        self._host = Path(tempfile.mkdtemp(prefix=f"harbor-{self.session_id[:40]}-"))
        spec = await asyncio.to_thread(self._spec)
        self._sandbox = await asyncio.to_thread(lambda: make_sandbox(spec, self.backend).__enter__())

    async def stop(self, delete: bool) -> None:
        if self._sandbox is not None:
            await asyncio.to_thread(self._sandbox.close)
            self._sandbox = None
        if self._host is not None:
            shutil.rmtree(self._host, ignore_errors=True)
            self._host = None

    # -- files ------------------------------------------------------------------------------

    def _bound(self, path: str) -> Path | None:
        """The host folder behind `path` when it is inside a bound folder, else None."""
        assert self._host is not None
        clean = os.path.normpath("/" + str(path).lstrip("/"))
        for target in BOUND:
            if clean == target or clean.startswith(target + "/"):
                return self._host / target.strip("/").replace("/", "_") / os.path.relpath(clean, target)
        return None

    async def upload_file(self, source_path, target_path: str) -> None:
        if (host := self._bound(target_path)) is not None:
            host.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source_path, host)
            host.chmod(0o755)
            return
        data = Path(source_path).read_bytes()
        await asyncio.to_thread(self._sandbox.write_file, target_path, data)

    async def upload_dir(self, source_dir, target_dir: str) -> None:
        if (host := self._bound(target_dir)) is not None:
            shutil.copytree(source_dir, host, dirs_exist_ok=True)
            for path in [host, *host.rglob("*")]:
                path.chmod(0o777 if path.is_dir() else 0o755)
            return
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(str(source_dir), arcname=".")
        archive = f"/tmp/.harbor-upload-{os.getpid()}.tar"
        await asyncio.to_thread(self._sandbox.write_file, archive, buffer.getvalue())
        await self.exec(
            f"mkdir -p {shlex.quote(target_dir)} && tar -xf {archive} -C {shlex.quote(target_dir)} && rm -f {archive}"
        )

    async def download_file(self, source_path: str, target_path) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        if (host := self._bound(source_path)) is not None:
            shutil.copy2(host, target_path)
            return
        data = await asyncio.to_thread(self._sandbox.read_file, source_path)
        Path(target_path).write_bytes(data)

    async def download_dir(self, source_dir: str, target_dir) -> None:
        target = Path(target_dir)
        target.mkdir(parents=True, exist_ok=True)
        if (host := self._bound(source_dir)) is not None:
            if host.is_dir():
                shutil.copytree(host, target, dirs_exist_ok=True)
            return
        # Through a file, not the command's output (which the sandbox caps).
        archive = f"/tmp/.harbor-download-{os.getpid()}.tar"
        packed = await self.exec(f"tar -C {shlex.quote(source_dir)} -cf {archive} .")
        if packed.return_code != 0:
            raise FileNotFoundError(f"{source_dir}: cannot be read in the sandbox ({packed.stdout})")
        data = await asyncio.to_thread(self._sandbox.read_file, archive)
        await self.exec(f"rm -f {archive}")
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            tar.extractall(target, filter="data")

    # -- commands ---------------------------------------------------------------------------

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        merged = self._merge_env(env) or {}
        exports = "".join(f"export {name}={shlex.quote(str(value))}; " for name, value in merged.items())
        where = f"cd {shlex.quote(cwd)} && " if cwd else ""
        line = f"{exports}{where}bash -c {shlex.quote(command)}"
        result = await asyncio.to_thread(self._sandbox.exec, line, timeout_sec, fresh=True)
        return ExecResult(stdout=result.output, stderr="", return_code=result.exit_code)
