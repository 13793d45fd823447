"""The process that lives inside a sandbox and runs its commands (stdlib only).

It is the sandbox's one persistent process: the host sends one JSON request per line on
stdin and reads one JSON response per line on stdout. Each command runs as
`bash -c` in a new session (process group) with rlimits; on return or timeout every
process the command left in the sandbox is killed, so nothing outlives its command and
a child holding the output pipe cannot hang the reply. The working directory and
exported variables are saved on exit and restored before the next command, so `cd` and
`export` behave as in one shell.

Runs under the sandbox's own python3 (the host's for the local backend, the image's for
docker), so it must stay compatible with Python 3.8+ and import nothing outside the stdlib.
"""

import base64
import contextlib
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time

STATE = "/tmp/.sandbox-state"
# Builtins only (`read`, `.`): a subshell or a `cat` here would cost a fork per command.
PRELUDE = (
    "__sandbox_cwd={workdir}; {{ read -r __sandbox_cwd < {state}/cwd; }} 2>/dev/null\n"
    'cd "$__sandbox_cwd" 2>/dev/null; unset __sandbox_cwd\n'
    ". {state}/env 2>/dev/null\n"
    "trap 'pwd > {state}/cwd; export -p > {state}/env' EXIT\n"
)
DRAIN_GRACE_S = 0.2


def _limit(limits):
    def apply():
        for name, value in (
            ("RLIMIT_AS", limits["memory_bytes"]),
            ("RLIMIT_FSIZE", limits["file_bytes"]),
            ("RLIMIT_NOFILE", limits["open_files"]),
            ("RLIMIT_CORE", 0),
        ):
            resource.setrlimit(getattr(resource, name), (value, value))

    return apply


def _kill_everything_else():
    """Kill every process in the sandbox but this one and its ancestors (pid namespace)."""
    keep = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        keep.add(pid)
    keep.add(1)
    for _ in range(3):
        victims = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in keep]
        if not victims:
            return
        for victim in victims:
            with contextlib.suppress(OSError):
                os.kill(victim, signal.SIGKILL)
        time.sleep(0.005)


def run(command, timeout, limits, env, isolated):
    script = PRELUDE.format(state=STATE, workdir=limits["workdir"]) + command + "\n"
    start = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_limit(limits),
        env=env,
    )
    fd = proc.stdout.fileno()
    cap = limits["output_bytes"]
    kept, truncated, timed_out = [], False, False
    size = 0
    deadline = start + timeout
    drain_until = None
    while True:
        now = time.monotonic()
        if drain_until is None:
            if proc.poll() is not None:
                drain_until = now + DRAIN_GRACE_S
            elif now >= deadline:
                timed_out = True
                drain_until = now + DRAIN_GRACE_S
            if drain_until is not None:
                # The command is over: nothing it started may outlive it.
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                if isolated:
                    _kill_everything_else()
        wait = (drain_until if drain_until is not None else deadline) - now
        ready, _, _ = select.select([fd], [], [], max(0.0, min(wait, 0.05)))
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if size < cap:
                kept.append(chunk[: cap - size])
            if size + len(chunk) > cap:
                truncated = True
            size += len(chunk)
        elif drain_until is not None and time.monotonic() >= drain_until:
            break
    proc.stdout.close()
    code = proc.wait()
    return {
        "exit_code": 128 - code if code < 0 else code,
        "output": base64.b64encode(b"".join(kept)).decode(),
        "truncated": truncated,
        "timed_out": timed_out,
        "seconds": time.monotonic() - start,
    }


def _path(path, workdir):
    return path if path.startswith("/") else os.path.join(workdir, path)


def main():
    config = json.loads(sys.argv[1])
    limits, env, isolated = config["limits"], config["env"], config["isolated"]
    os.makedirs(STATE, exist_ok=True)
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        try:
            if op == "exec":
                response = run(request["command"], request["timeout"], limits, env, isolated)
            elif op == "read":
                with open(_path(request["path"], limits["workdir"]), "rb") as f:
                    response = {"data": base64.b64encode(f.read()).decode()}
            elif op == "write":
                path = _path(request["path"], limits["workdir"])
                parent = os.path.dirname(path)
                if parent:
                    os.makedirs(parent, exist_ok=True)
                with open(path, "wb") as f:
                    f.write(base64.b64decode(request["data"]))
                response = {}
            elif op == "state":
                response = {}
                for name in ("cwd", "env"):
                    try:
                        with open(os.path.join(STATE, name)) as f:
                            response[name] = f.read()
                    except OSError:
                        response[name] = None
            elif op == "set_state":
                for name in ("cwd", "env"):
                    if request.get(name) is not None:
                        with open(os.path.join(STATE, name), "w") as f:
                            f.write(request[name])
                response = {}
            else:
                response = {"error": f"unknown op {op!r}", "kind": "protocol"}
        except OSError as exc:
            response = {"error": f"{type(exc).__name__}: {exc}", "kind": "os", "errno": exc.errno}
        out.write(json.dumps(response) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
