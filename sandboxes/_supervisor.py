"""The process that lives inside a sandbox and runs its commands (stdlib only).

It is the sandbox's one long-lived process. The host sends one JSON request per line on
stdin and reads one JSON response per line on stdout.

Commands run in one persistent bash (a "shell generation") that the supervisor started:
spawning `bash -c` per command costs a fork+exec and a bash start-up (~4 ms); evaluating
the command in a running shell costs a pipe round trip (~0.2 ms). The shell runs a small
loop (`SHELL_LOOP`): it reads a sequence number from a control pipe, reads the command
from a memfd the supervisor filled, and writes a record (sequence number, exit status,
cwd, `export -p`) to a second control pipe. So `cd`, `export`, functions and aliases carry
over as in one shell. (The command is `eval`ed, not sourced, so that errors read
"bash: ..." as with `bash -c`; the shell reads a regular file in blocks, a pipe byte by byte.)

A fresh exec (`{"op": "exec", "fresh": true}`) instead starts a new
`bash --noprofile --norc -c COMMAND` with the sandbox's original environment, in the
workdir, without the persistent shell's control fds; its exit code is the kernel's
(waitpid), never a record a command could write. Grading and diff extraction use it, so
nothing the agent left in its shell (functions, aliases, PATH, `trap`) applies to them.

Commands can neither signal, trace nor write to the supervisor (the policy we train is an
adversary of the sandbox):
- it is pid 1 of its pid namespace (bubblewrap `--as-pid-1`; docker's main process): the
  kernel drops SIGKILL/SIGSTOP sent to it from inside the namespace, and every other signal
  it has no handler for (Python's SIGINT handler is reset to SIG_DFL). `kill(-1, SIG)`
  sweeps skip it.
- it is not dumpable (PR_SET_DUMPABLE 0): /proc/1/fd, /proc/1/mem and ptrace need
  CAP_SYS_PTRACE, which no command has.
- where it can (local "overlay" layout, docker), it runs as root with a minimal capability
  set (CAP_KILL, CAP_SETUID, CAP_SETGID, CAP_SETPCAP) and commands run under the command
  uid (`config["user"]`) with no capability at all: the shell child does setgroups /
  setresgid / setresuid; for a root command user (SWE-bench images) it also drops every
  capability from the bounding set and clears its sets, so exec gives commands none, and
  the supervisor keeps a saved uid of its own, so that `prlimit` on pid 1 is refused too.
- file operations for the host (read_file/write_file) run in a short forked child that
  became the command user, holds none of the supervisor's fds but its result pipe, and
  opens only regular files (O_NONBLOCK, then fstat): a symlink planted by the agent leads
  only where the agent could write itself, never into the host channel (/proc/self/fd/1).
- the supervisor's own state (the command text, the exports to restore) lives in memfds,
  not in a directory: a full or replaced /tmp cannot stop it.
On the local "copy" layout (no root on the host) commands and supervisor share the one
uid of a user namespace: pid 1 and non-dumpable still hold, but prlimit on pid 1 does not
(the layout has no second uid to give commands).

The supervisor, not the shell, enforces the limits, because the shell itself runs
untrusted code:
- timeout: at the deadline every process in the sandbox but the supervisor is killed with
  `kill(-1, SIGKILL)`. In a pid namespace that is one atomic sweep that no forking process
  can outrun; the shell dies with it and a new generation is started from the last
  recorded cwd and environment.
- nothing outlives its command: after the record arrives, any process other than the
  shell (a `cmd &`, a daemon that double-forked) gets the same sweep. The supervisor
  first stops everything (`kill(-1, SIGSTOP)`) and only then looks: left running, a
  backgrounded bomb churns faster than /proc can be read, and one look could miss it.
- process count: the backend caps it (RLIMIT_NPROC under an unprivileged uid, or a pids
  cgroup); a watchdog here sees the cap being reached and sweeps, naming the cause "pids".
- output: at most `output_bytes` are kept, the first half and the end (with one line
  saying how much of the middle was dropped); the rest is drained.
- storage: the backend caps the workspace (`disk_bytes`) and /tmp; a command after which
  the workdir or /tmp is full (statvfs, or where the backend asks for it, `probe_disk`, a
  probe write after a failed command) gets `cause="disk"`: the agent filled its own
  storage, a command result like any other, and a later `rm` frees it.
A command that kills, replaces (`exec`) or exits the shell just ends that generation.

Runs under the sandbox's own python3 (the host's for the local backend, the image's for
docker), so it must stay compatible with Python 3.8+ and import nothing outside the stdlib.
It must be pid 1 of its own pid namespace: `kill(-1)` anywhere else would hit the host.

Over 450 lines on purpose: it is shipped into every sandbox as one stdlib-only source and
run there as the sandbox's one process, so it cannot import a helper from a second file:
shell generations, jobs, file operations, capabilities and id-mapped overlays all live here.
"""

import base64
import contextlib
import errno
import json
import os
import resource
import select
import signal
import stat
import subprocess
import sys
import time

# The shell's view of its fds: commands inherit them, so they sit far from 0-9 where
# scripts put their own redirections.
RESTORE_FD, COMMAND_FD, OUT_FD, CTL_IN_FD, CTL_OUT_FD = 59, 60, 61, 62, 63
# Builtins only: a subshell or external program here would cost a fork per command.
SHELL_LOOP = r"""
__sb_report() {
  { printf '%s\0%s\0%s\0%s\0' "$__sb_n" "$1" "$2" "$PWD"; export -p; printf '\0'; } >&63
}
if [ -n "$1" ]; then . "$1" >/dev/null 2>&1; exec 59<&-; fi
set --
__sb_n=0
trap '__sb_report $? exit' EXIT
while read -r __sb_n <&62; do
  IFS= read -r -d '' __sb_command < /proc/self/fd/60
  eval "$__sb_command"
  __sb_report $? next
  exec 0</dev/null 1>&61 2>&61
done
"""
RECORD_FIELDS = 5
WATCH_EVERY_S = 0.02
WATCH_BUSY_S = 0.002
# How long killed processes may take to be gone. SIGKILL cannot be refused, but a process
# dies only when the kernel gets to it: one in uninterruptible sleep (disk I/O), or tearing
# down a large address space, on a machine loaded several times over, took more than 3 s
# (an astropy build's compiler, 2026-12-06, load ~8 on 2 cores). Only a process stuck in the
# kernel for good outlasts this.
KILL_SWEEP_S = 60.0
VERIFY_TIMEOUT_S = 10.0
# Less than this free in /tmp or the workdir after a command means the sandbox's storage
# is full: the command gets cause "disk".
MIN_FREE_BYTES = 128 * 1024
PROBE_BYTES = 128 * 1024
FILE_OP_MAX_FD = 1 << 16
# Capabilities (linux/capability.h).
CAP_CHOWN, CAP_KILL, CAP_SETGID, CAP_SETUID, CAP_SETPCAP, CAP_SYS_ADMIN = 0, 5, 6, 7, 8, 21
CAP_LAST = 63
SUPERVISOR_CAPS = (CAP_KILL, CAP_SETGID, CAP_SETUID, CAP_SETPCAP)
PR_CAPBSET_DROP, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_CAP_AMBIENT = 24, 4, 36, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# Idmapped mounts (linux/mount.h, linux/sched.h, fcntl.h). The syscall numbers are those of
# the unified table, the same on x86_64 and aarch64 (and every architecture but alpha).
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC, AT_EMPTY_PATH, AT_FDCWD = 1, 0o2000000, 0x1000, -100
MOVE_MOUNT_F_EMPTY_PATH = 4
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV, MOUNT_ATTR_IDMAP = 0x1, 0x2, 0x4, 0x100000
CLONE_NEWUSER = 0x10000000
# A saved uid for the supervisor when commands run as root: no command's uid, so prlimit(2)
# and friends (which compare real/saved uids) refuse them.
SUPERVISOR_SAVED_UID = 65533


class Shell:
    """One generation of the persistent bash and the three pipes to it."""

    def __init__(self, pid, ctl_in, ctl_out, out):
        self.pid, self.ctl_in, self.ctl_out, self.out = pid, ctl_in, ctl_out, out
        self.status = None  # waitpid status once it has exited
        self.seq = 0
        self.verified = True  # False once a fresh command ran: it may have killed this shell

    def close(self):
        for fd in (self.ctl_in, self.ctl_out, self.out):
            with contextlib.suppress(OSError):
                os.close(fd)


class Job:
    """What `Supervisor.watch` waits on: the persistent shell's record, or a fresh bash's exit."""

    def __init__(self, pid, out, ctl_out=None, seq=None):
        self.pid, self.out, self.ctl_out, self.seq = pid, out, ctl_out, seq
        self.status = None


class Supervisor:
    def __init__(self, config, user):
        self.workdir = config["workdir"]
        self.user = user  # (uid, gid, groups) of commands, or None: this process's own
        # docker: the image's ENV (os.environ here) under the sandbox's own variables.
        self.env = dict(os.environ, **config["env"]) if config.get("inherit_env") else dict(config["env"])
        self.limits = config["limits"]
        self.probe_disk = bool(config.get("probe_disk"))
        self.bash = _which("bash", self.env.get("PATH", "/usr/bin:/bin"))
        if self.bash is None:
            raise SystemExit("sandbox supervisor: no bash on PATH " + self.env.get("PATH", ""))
        state = config.get("state") or {}
        self.cwd = state.get("cwd") or self.workdir
        self.exports = base64.b64decode(state["env"]) if state.get("env") else None
        self.shell = None
        self.fresh = None  # the pid of a running fresh exec
        self.oom_counter = config.get("oom_counter")  # local: its memory cgroup's, bound in
        self.oom_kills = _oom_kills(self.oom_counter)
        self.command_fd = _memfd("sandbox-command")

    # -- the command user ----------------------------------------------------------------
    def become_user(self):
        """In a forked child: become the command user, with no capability left."""
        if self.user is not None:
            uid, gid, groups = self.user
            for cap in range(CAP_LAST + 1):  # nothing for exec to give back (file caps)
                _prctl(PR_CAPBSET_DROP, cap)
            os.setgroups(groups)
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)  # clears every capability, unless uid is 0
        _drop_all_capabilities()
        _prctl(PR_SET_DUMPABLE, 0)  # until exec: nothing of the supervisor's to trace

    def as_user(self, fn, *args):
        """Run `fn(*args)` (returning JSON-able data) in a forked child that became the
        command user and holds no fd of the supervisor's but its result pipe."""
        result_r, result_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.closerange(0, result_w)
                os.closerange(result_w + 1, FILE_OP_MAX_FD)
                self.become_user()
                payload = {"ok": fn(*args)}
            except OSError as exc:
                payload = {"errno": exc.errno, "error": f"{type(exc).__name__}: {exc}"}
            except BaseException as exc:  # noqa: BLE001 - report anything, then die
                payload = {"error": f"{type(exc).__name__}: {exc}"}
            try:
                data = json.dumps(payload).encode()
                view = memoryview(data)
                while view:
                    view = view[os.write(result_w, view) :]
            except BaseException:  # noqa: BLE001
                code = 1
            os._exit(code)
        os.close(result_w)
        chunks = []
        try:
            while True:
                chunk = os.read(result_r, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(result_r)
            _waitpid(pid)
        try:
            payload = json.loads(b"".join(chunks))
        except ValueError:
            raise RuntimeError("a file operation's child died without an answer") from None
        if "ok" in payload:
            return payload["ok"]
        if payload.get("errno") is not None:
            raise OSError(payload["errno"], payload["error"])
        raise RuntimeError(payload.get("error", "file operation failed"))

    # -- shell generations --------------------------------------------------------------
    def spawn(self):
        """Start a shell generation from the last recorded cwd and exports."""
        restore_fd = None
        if self.exports is not None:
            restore_fd = _memfd("sandbox-restore")
            _fill(restore_fd, self.exports)
        ctl_in_r, ctl_in_w = os.pipe()
        ctl_out_r, ctl_out_w = os.pipe()
        out_r, out_w = os.pipe()
        # Restoring: start from PATH alone, so that variables unset before are not revived.
        env = {"PATH": self.env.get("PATH", "/usr/bin:/bin")} if restore_fd is not None else dict(self.env)
        restore = f"/proc/self/fd/{RESTORE_FD}" if restore_fd is not None else ""
        pid = os.fork()
        if pid == 0:  # the child: becomes bash; must never return into the supervisor
            try:
                fds = {OUT_FD: out_w, CTL_IN_FD: ctl_in_r, CTL_OUT_FD: ctl_out_w, COMMAND_FD: self.command_fd}
                if restore_fd is not None:
                    fds[RESTORE_FD] = restore_fd
                self.exec_child(
                    [self.bash, "--noprofile", "--norc", "-c", SHELL_LOOP, "bash"] + ([restore] if restore else []),
                    env,
                    out_w,
                    fds,
                    (self.cwd, self.workdir, "/"),
                )
            except BaseException as exc:  # noqa: BLE001 - report anything, then die
                with contextlib.suppress(OSError):
                    os.write(2, (f"sandbox supervisor: cannot start bash: {exc}\n").encode())
            os._exit(127)
        for fd in (ctl_in_r, ctl_out_w, out_w) + ((restore_fd,) if restore_fd is not None else ()):
            os.close(fd)
        os.set_blocking(out_r, False)
        os.set_blocking(ctl_out_r, False)
        self.shell = Shell(pid, ctl_in_w, ctl_out_r, out_r)

    def exec_child(self, args, env, out_w, fds, cwds):
        """In a forked child: set it up as a command process (own session, output to
        `out_w`, only the fds in `fds`, rlimits, the command user) and exec `args`."""
        os.setsid()  # `kill 0` in a command must not reach the supervisor
        # Python ignores these, and ignored signals survive exec: commands must see
        # SIGPIPE (`yes | head`) and SIGXFSZ (the file size limit) as any shell does.
        for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ", "SIGINT"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        # Park the sources above every target first, so that no dup2 overwrites one.
        parked = {}
        for i, (target, source) in enumerate(fds.items()):
            parked[target] = os.dup2(source, 200 + i)
        for target, source in parked.items():
            os.dup2(source, target)
        keep = sorted(fds)
        low = 3
        for fd in keep:
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, FILE_OP_MAX_FD)
        for fd in keep:
            os.set_inheritable(fd, True)
        _set_rlimits(self.limits)
        try:  # the out-of-memory killer takes a command before the supervisor
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
        self.become_user()
        for cwd in cwds:
            try:
                os.chdir(cwd)
                break
            except OSError:
                continue
        os.execve(args[0], args, env)

    def ensure_shell(self):
        if self.shell is not None and self.shell.status is None and not self.shell.verified:
            self.verify_shell()
        if self.shell is not None and self.shell.status is None:
            self.reap()
        if self.shell is not None and self.shell.status is not None:
            self.shell.close()
            self.shell = None
        if self.shell is None:
            self.spawn()

    def verify_shell(self):
        """Make sure the persistent shell is alive before a command is given to it.

        A fresh command runs beside the shell and may kill it (`kill -9 -1` from a fresh bash
        reaches every process but itself). SIGKILL takes effect when the victim next runs,
        which on a loaded machine can be after the fresh command has been reported: the shell
        is not yet a zombie, so nothing shows it is doomed, and the next command would be
        handed to it and come back as the shell's death (exit 137, no output) without having
        run. One no-op round trip settles it: the shell answers, or its death is collected
        and the caller starts a new generation from the last recorded state."""
        self.shell.verified = True
        self.run(":", VERIFY_TIMEOUT_S)

    def reap(self, job=None):
        """Collect every exited child (the supervisor is pid 1: orphans come here)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.shell is not None and pid == self.shell.pid:
                self.shell.status = status
            if job is not None and pid == job.pid:
                job.status = status

    def others(self):
        """Live processes in the sandbox other than the supervisor and the shell."""
        keep = {1, os.getpid()}
        if self.shell is not None and self.shell.status is None:
            keep.add(self.shell.pid)
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in keep:
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue  # already gone
            if state not in (b"Z", b"X"):
                found.append(int(name))
        return found

    def freeze(self):
        """Stop every process in the sandbox but this one, so that one look at /proc is conclusive.

        What a command leaves behind may churn: a backgrounded fork bomb's processes each fork
        and exit, so a look at /proc can list only pids that are gone by the time they are read
        and miss their children, born after the listing passed. `kill(-1)` reaches a fork in
        flight too (the fork restarts, or its child is born with the signal pending), so once it
        returns no new process can start running: the population only shrinks."""
        with contextlib.suppress(ProcessLookupError, PermissionError):  # nothing to stop
            os.kill(-1, signal.SIGSTOP)

    def thaw(self):
        """Let the shell, the only process a clean look leaves, go on after `freeze`."""
        if self.shell is not None and self.shell.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.shell.pid, signal.SIGCONT)

    def sweep(self, job=None):
        """Kill every process in the sandbox but this one (the shell included)."""
        stop = time.monotonic() + KILL_SWEEP_S
        while time.monotonic() < stop:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass  # nothing left to signal
            except PermissionError:
                pass
            self.reap(job)
            if not self.others() and (self.shell is None or self.shell.status is not None):
                return
            time.sleep(0.002)
        left = ", ".join(f"{pid} ({_state(pid)})" for pid in self.others()[:5])
        raise RuntimeError(f"processes survived {KILL_SWEEP_S:.0f} s of SIGKILL: {left or 'the shell'}")

    # -- one command ---------------------------------------------------------------------
    def run(self, command, timeout, fresh=False):
        if fresh:
            return self.run_fresh(command, timeout)
        self.ensure_shell()
        shell = self.shell
        _drain(shell.out, None)  # anything printed between commands belongs to none
        _fill(self.command_fd, command.encode("utf-8", "surrogateescape") + b"\n")
        shell.seq += 1
        start = time.monotonic()
        job = Job(shell.pid, shell.out, shell.ctl_out, shell.seq)
        try:
            os.write(shell.ctl_in, b"%d\n" % shell.seq)
        except BrokenPipeError:
            self.reap(job)
        output, record, cause, timed_out = self.watch(job, start, start + timeout)
        if record is not None and record["kind"] == "exit":
            _wait_exit(shell.pid, self)
        cause = self.settle(job, output, cause, timed_out)
        if record is not None:
            self.cwd, self.exports = record["cwd"], record["env"]
            exit_code = record["rc"]
        elif shell.status is not None and not timed_out and cause is None:
            exit_code = _exit_code(shell.status)
        else:
            exit_code = 128 + signal.SIGKILL
        return self.result(exit_code, output, timed_out, cause, start)

    def run_fresh(self, command, timeout):
        """`bash -c COMMAND` in a new process: the spec's env, the workdir, no shell state."""
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                self.exec_child(
                    [self.bash, "--noprofile", "--norc", "-c", command, "bash"],
                    dict(self.env),
                    out_w,
                    {},
                    (self.workdir, "/"),
                )
            except BaseException as exc:  # noqa: BLE001 - report anything, then die
                with contextlib.suppress(OSError):
                    os.write(2, (f"sandbox supervisor: cannot start bash: {exc}\n").encode())
            os._exit(127)
        os.close(out_w)
        os.set_blocking(out_r, False)
        start = time.monotonic()
        job = Job(pid, out_r)
        try:
            output, _, cause, timed_out = self.watch(job, start, start + timeout)
            cause = self.settle(job, output, cause, timed_out)
        finally:
            if job.status is None:  # never leave it unreaped
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                job.status = _waitpid(pid)
            os.close(out_r)
            if self.shell is not None:
                self.shell.verified = False
        if timed_out or cause == "pids":
            exit_code = 128 + signal.SIGKILL
        else:
            exit_code = _exit_code(job.status)  # the kernel's word, not a command's
        return self.result(exit_code, output, timed_out, cause, start)

    def watch(self, job, start, deadline):
        """Collect the job's output until it is done, timed out, or hit the process cap."""
        output = Output(self.limits["output_bytes"])
        record, cause, timed_out = None, None, False
        control = b""
        next_watch = start + WATCH_EVERY_S
        open_fds = [job.out] + ([job.ctl_out] if job.ctl_out is not None else [])
        while record is None:
            now = time.monotonic()
            if now >= deadline:
                timed_out, cause = True, "timeout"
                break
            if not open_fds:  # nothing to wait on but the watch
                time.sleep(max(0.0, min(deadline, next_watch) - now))
                ready = []
            else:
                ready, _, _ = select.select(open_fds, [], [], max(0.0, min(deadline, next_watch) - now))
            if job.out in ready and _drain(job.out, output):
                open_fds.remove(job.out)  # every writer is gone
            if job.ctl_out is not None and job.ctl_out in ready:
                chunk = _read(job.ctl_out)
                if chunk == b"":
                    open_fds.remove(job.ctl_out)  # the shell and all it started are gone
                control += chunk or b""
                record = _parse_record(control, job.seq)
            if record is None and (time.monotonic() >= next_watch or job.out not in open_fds):
                self.reap(job)
                if job.status is not None:
                    break  # fresh: done; the shell: died without a record (killed, `exec`ed)
                count = _count_processes()
                if count >= self.limits["pids"]:
                    cause = "pids"
                    break
                # Near the cap, look often: a bomb's processes hover there while their
                # forks are refused, and a sample must catch them at it.
                busy = count * 2 >= self.limits["pids"]
                next_watch = time.monotonic() + (WATCH_BUSY_S if busy else WATCH_EVERY_S)
        return output, record, cause, timed_out

    def settle(self, job, output, cause, timed_out):
        """After the job: sweep what it left running, drain its last output; the cause."""
        if timed_out or cause == "pids":
            self.sweep(job)
        else:
            self.freeze()
            left = self.others()
            if left:  # something the command started is still running: it goes too
                if len(left) + 3 >= self.limits["pids"]:
                    cause = "pids"  # e.g. a fork bomb that put itself in the background
                else:
                    cause = "background"
                self.sweep(job)
            else:
                self.thaw()
        self.reap(job)
        _drain(job.out, output)  # what the killed processes wrote before they died
        return cause

    def result(self, exit_code, output, timed_out, cause, start):
        if cause in (None, "background"):
            cause = self.cause_of(exit_code) or cause
        if cause in (None, "background") and self.storage_full(exit_code):
            cause = "disk"
        return {
            "exit_code": exit_code,
            "output": base64.b64encode(output.data()).decode(),
            "truncated": output.truncated,
            "timed_out": timed_out,
            "cause": cause,
            "seconds": time.monotonic() - start,
        }

    def storage_full(self, exit_code):
        if _full_storage([self.workdir, "/tmp"]):
            return True
        if self.probe_disk and exit_code != 0:
            # The engine's quota (btrfs qgroups) does not show in statvfs: try a write.
            try:
                return bool(self.as_user(_probe_write, self.workdir))
            except (OSError, RuntimeError):
                return False
        return False

    def cause_of(self, exit_code):
        if exit_code == 128 + signal.SIGXFSZ:
            return "file_size"
        if self.oom_kills is not None:
            # Any process of the command may have been the victim, not just the last one.
            kills = _oom_kills(self.oom_counter)
            if kills is not None and kills > self.oom_kills:
                self.oom_kills = kills
                return "memory"
        return None

    def state(self):
        return {
            "cwd": self.cwd,
            "env": base64.b64encode(self.exports).decode() if self.exports is not None else None,
        }


class Output:
    """At most `cap` bytes of a command's output: all of it when it fits, else its first half
    and its last bytes around one line that says how much was dropped.

    The end matters as much as the start: a test run's summary comes last (a real row's log
    of network failures, psf__requests-1724, ran to 1.2 MB and lost it when only the first
    bytes were kept)."""

    def __init__(self, cap):
        self.cap, self.size = cap, 0
        self.head_cap = cap // 2
        self.head = bytearray()
        self.tail = bytearray()

    def add(self, chunk):
        self.size += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            excess = len(self.tail) - (self.cap - self.head_cap)
            if excess > 0:
                del self.tail[:excess]

    @property
    def truncated(self):
        return self.size > self.cap

    def data(self):
        if not self.truncated:
            return bytes(self.head + self.tail)
        marker = b""
        for _ in range(2):  # the marker's length depends on the count it states
            keep = max(0, min(len(self.tail), self.cap - len(self.head) - len(marker)))
            dropped = self.size - len(self.head) - keep
            marker = f"\n[... {dropped} bytes of output dropped ...]\n".encode()
        keep = max(0, min(len(self.tail), self.cap - len(self.head) - len(marker)))
        tail = bytes(self.tail[len(self.tail) - keep :]) if keep else b""
        return (bytes(self.head) + marker + tail)[: self.cap]


def _read(fd):
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None


def _drain(fd, output):
    """Read what the pipe holds now (non-blocking); drop it when `output` is None.

    True when the pipe is at end of file (no writer is left)."""
    while True:
        chunk = _read(fd)
        if chunk is None:
            return False
        if chunk == b"":
            return True
        if output is not None:
            output.add(chunk)


def _parse_record(buffer, seq):
    """The shell's record for command `seq`, once all of it has arrived.

    Records are NUL-separated: seq, status, kind (next|exit), cwd, `export -p` text.
    """
    while buffer.count(b"\0") >= RECORD_FIELDS:
        parts = buffer.split(b"\0", RECORD_FIELDS)
        buffer = parts[RECORD_FIELDS]
        if parts[0] != str(seq).encode():
            continue  # a stale record (e.g. the EXIT trap of an older command)
        try:
            rc = int(parts[1] or 0)
        except ValueError:
            continue  # not a record the loop wrote
        return {
            "rc": rc,
            "kind": parts[2].decode("utf-8", "replace"),
            "cwd": parts[3].decode("utf-8", "surrogateescape"),
            "env": parts[4],
        }
    return None


def _wait_exit(pid, supervisor, limit_s=1.0):
    """Let a shell that ran `exit` finish exiting (its EXIT trap already reported)."""
    stop = time.monotonic() + limit_s
    while supervisor.shell.status is None and time.monotonic() < stop:
        supervisor.reap()
        time.sleep(0.001)


def _waitpid(pid):
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue


def _exit_code(status):
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _state(pid):
    """`name, state` of a process from /proc (state `D`: uninterruptible sleep), for errors."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            head, _, rest = f.read().decode(errors="replace").rpartition(")")
        return f"{head.partition('(')[2]}, {rest.split()[0]}"
    except (OSError, IndexError):
        return "gone"


def _count_processes():
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def _full_storage(paths):
    for path in paths:
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        if st.f_blocks and st.f_bavail * st.f_frsize < MIN_FREE_BYTES:
            return f"{path} has {st.f_bavail * st.f_frsize} bytes free"
        if st.f_files and st.f_favail == 0:
            return f"{path} has no free inodes"
    return None


def _probe_write(folder):
    """True when `folder`'s filesystem refuses a small write for lack of space or quota."""
    path = os.path.join(folder, f".sandbox-disk-probe-{os.getpid()}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    try:
        os.write(fd, bytes(PROBE_BYTES))
        return False
    except OSError as exc:
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)


def _oom_kills(counter=None):
    """The cgroup's count of out-of-memory kills, where the sandbox can read it: `counter`
    (a file the backend bound in), else its own cgroup's files (docker)."""
    for path, key in (
        *(((counter, "oom_kill"),) if counter else ()),
        ("/sys/fs/cgroup/memory.events", "oom_kill"),
        ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
    ):
        try:
            with open(path) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def _set_rlimits(limits):
    pairs = [
        ("RLIMIT_AS", limits["memory_bytes"]),
        ("RLIMIT_FSIZE", limits["file_bytes"]),
        ("RLIMIT_NOFILE", limits["open_files"]),
        ("RLIMIT_CORE", 0),
    ]
    if limits.get("nproc"):
        # Counted per real uid on the whole host, and ignored for uid 0: the backend only
        # asks for it when the sandbox runs under a uid of its own.
        pairs.append(("RLIMIT_NPROC", limits["pids"]))
    for name, value in pairs:
        value = resource.RLIM_INFINITY if value is None else value
        resource.setrlimit(getattr(resource, name), (value, value))


def _which(name, path):
    for folder in path.split(":"):
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _memfd(name):
    """An anonymous in-memory file (the supervisor's state), readable but not writable by
    the command user through /proc/self/fd."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(name, 0)  # inheritable: the shell gets it
    else:  # pragma: no cover - Python or libc without memfd_create
        fd = os.open("/dev/shm", os.O_RDWR | getattr(os, "O_TMPFILE", 0), 0o644)
        os.set_inheritable(fd, True)
    os.fchmod(fd, 0o644)
    return fd


def _fill(fd, data):
    os.ftruncate(fd, 0)
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)
    os.lseek(fd, 0, os.SEEK_SET)


def _path(path, workdir):
    return path if path.startswith("/") else os.path.join(workdir, path)


_libc = None


def _libc_call(name, *args):
    """Call libc `name`; -1 with errno on failure, as C does. Raises OSError without ctypes."""
    global _libc
    import ctypes

    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    result = getattr(_libc, name)(*args)
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")
    return result


def _prctl(option, value, arg3=0):
    try:
        _libc_call("prctl", option, value, arg3, 0, 0)
        return True
    except (OSError, AttributeError, ImportError):
        return False


def _capset(permitted_mask):
    """Keep only `permitted_mask` in the effective and permitted sets; inheritable empty."""
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)
    data = (Data * 2)()
    _libc_call("capget", ctypes.byref(header), data)
    for i in range(2):
        keep = (permitted_mask >> (32 * i)) & 0xFFFFFFFF
        data[i].permitted &= keep
        data[i].effective = data[i].permitted
        data[i].inheritable = 0
    _libc_call("capset", ctypes.byref(header), data)


def _restrict_capabilities(keep):
    """The supervisor's own set, after setup: `keep` only, in every set and the bounding set."""
    for cap in range(CAP_LAST + 1):
        if cap not in keep:
            _prctl(PR_CAPBSET_DROP, cap)  # needs CAP_SETPCAP; EINVAL past the last cap
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    mask = 0
    for cap in keep:
        mask |= 1 << cap
    _capset(mask)


def _drop_all_capabilities():
    """No capability now, and none from any exec: for a command user that is root."""
    if not _has_capabilities():
        return
    for cap in range(CAP_LAST + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    _capset(0)
    if _has_capabilities():
        raise OSError(errno.EPERM, "could not drop the command's capabilities")


def _has_capabilities():
    """Whether this process holds any capability, or could get one from exec."""
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            capped = key in ("CapPrm", "CapEff", "CapBnd", "CapAmb", "CapInh") and int(value, 16)
            if capped and (key != "CapBnd" or os.getuid() == 0 or os.geteuid() == 0):
                return True
    return False


def _resolve_user(spec):
    """(uid, gid, groups) of the command user: {"uid", "gid"} or {"name": "user[:group]"}."""
    if spec is None:
        return None
    if "uid" in spec:
        return int(spec["uid"]), int(spec["gid"]), [int(spec["gid"])]
    import grp
    import pwd

    name, _, group = spec.get("name", "").partition(":")
    if not name:
        uid, gid, login = 0, 0, "root"
    elif name.isdigit():
        uid = int(name)
        try:
            entry = pwd.getpwuid(uid)
            gid, login = entry.pw_gid, entry.pw_name
        except KeyError:
            gid, login = uid, None
    else:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise SystemExit(f"user {name!r} does not exist in the image") from None
        uid, gid, login = entry.pw_uid, entry.pw_gid, name
    if group:
        gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
    groups = [gid]
    if login is not None and not group:
        with contextlib.suppress(KeyError, OSError):
            groups = sorted(set(os.getgrouplist(login, gid)))
    return uid, gid, groups


def _mount_overlay(spec, target, owner):
    """Mount the sandbox's copy-on-write workspace (the local backend), its upper directory
    on the sandbox's own size-capped tmpfs (`spec["rw"]`, bubblewrap made it)."""
    if spec.get("idmap"):
        idmap = spec["idmap"]
        _idmap_layers([spec["lower"][i] for i in idmap["layers"]], idmap["owner"], owner)
    upper, work = spec["rw"] + "/upper", spec["rw"] + "/work"
    for folder in (upper, work):
        os.makedirs(folder, exist_ok=True)
    if spec.get("chown_upper", True):
        os.chown(upper, owner[0], owner[1])  # the merged workspace's root takes its owner
    # index/xino/redirect_dir/metacopy off: the upper directory must stay a self-contained
    # tree, because a fork copies it and stacks the copy as a lower layer of the child.
    data = "lowerdir={},upperdir={},workdir={},index=off,xino=off,redirect_dir=off,metacopy=off".format(
        ":".join(spec["lower"]),
        upper,
        work,
    )
    _libc_call("mount", b"overlay", target.encode(), b"overlay", 0, data.encode())


def _idmap_layers(paths, on_disk, owner):
    """Show each of `paths` (read-only layers the host shares among sandboxes, owned by
    uid and gid `on_disk`) as owned by `owner` (the command user's uid, gid): an idmapped
    mount of each (mount_setattr MOUNT_ATTR_IDMAP: Linux 5.12; overlayfs takes one as a
    lower layer from 5.19), read-only, stacked on the bind it was cloned from. So a shared
    layer reads as the sandbox's own files, as a private copy chowned to its uid would,
    without the copy. The idmapping is a user namespace made for it alone that maps the one
    id `on_disk` to the owner's (any other owner shows as the overflow id); it holds no
    process once the mounts exist. Raises OSError where the kernel or the layers'
    filesystem cannot (the host probes for that first and copies instead)."""
    import ctypes
    import struct

    _libc_call("getpid")  # loads libc
    syscall = _libc.syscall
    syscall.restype = ctypes.c_long

    def check(result, what):
        if result < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")
        return result

    userns = _idmap_namespace(on_disk, owner)
    try:
        attr = struct.pack(
            "QQQQ", MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, userns
        )
        for path in paths:
            tree = check(
                syscall(SYS_OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), "open_tree"
            )
            try:
                buffer = ctypes.create_string_buffer(attr, len(attr))
                check(
                    syscall(SYS_MOUNT_SETATTR, tree, b"", AT_EMPTY_PATH, buffer, ctypes.c_size_t(len(attr))),
                    "mount_setattr (idmap)",
                )
                check(
                    syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, path.encode(), MOVE_MOUNT_F_EMPTY_PATH), "move_mount"
                )
            finally:
                os.close(tree)
    finally:
        os.close(userns)


def _idmap_namespace(on_disk, owner):
    """An fd of a new user namespace whose one uid and gid `on_disk` are `owner` outside."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # holds the namespace open while the parent writes its maps and opens it
        try:
            os.close(ready_r)
            os.close(done_w)
            _libc_call("unshare", CLONE_NEWUSER)
            os.write(ready_w, b"1")
            os.read(done_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        if os.read(ready_r, 1) != b"1":
            raise OSError(errno.EPERM, "could not make a user namespace for an idmapped layer")
        for name, outside in (("uid_map", owner[0]), ("gid_map", owner[1])):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(f"{on_disk} {outside} 1\n")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    finally:
        os.close(ready_r)
        os.close(done_w)  # the child reads end of file, and exits
        os.waitpid(pid, 0)


def _copy_in(source, target):
    """The local "copy" layout: the workspace, copied from a read-only bind onto the
    sandbox's size-capped tmpfs at the workdir."""
    if not os.path.isdir(source):
        return
    done = subprocess.run(
        ["cp", "-dR", "--preserve=mode,timestamps,links", source + "/.", target],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if done.returncode != 0:
        raise OSError(errno.EIO, "copying the workspace in: " + done.stderr.decode(errors="replace")[-500:])


def _read_op(path):
    fd = _open_regular(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        return base64.b64encode(f.read()).decode()


def _write_op(path, data):
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    fd = _open_regular(path, os.O_WRONLY | os.O_CREAT, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.truncate(0)
        f.write(base64.b64decode(data))
    return {}


def _open_regular(path, flags, mode=0o666):
    """Open `path` only if it is a regular file: never a pipe, socket or device that a
    planted symlink could point at (O_NONBLOCK: a FIFO must not block the open)."""
    fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"Is a directory: {path!r}")
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file: {path!r}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _makedirs_op(path):
    os.makedirs(path, exist_ok=True)
    return {}


def handle(supervisor, request):
    op = request["op"]
    if op == "exec":
        return supervisor.run(request["command"], request["timeout"], bool(request.get("fresh")))
    if op == "read":
        return {"data": supervisor.as_user(_read_op, _path(request["path"], supervisor.workdir))}
    if op == "write":
        return supervisor.as_user(_write_op, _path(request["path"], supervisor.workdir), request["data"])
    if op == "state":
        return supervisor.state()
    return {"error": f"unknown op {op!r}", "kind": "protocol"}


def setup(config):
    """Mount what the backend asked for, settle the users and capabilities; the Supervisor."""
    if config.get("hosts") is not None:
        # Docker leaves a sandbox without network an empty /etc/hosts (its own file, bound
        # in): loopback names must resolve. Written here, as root, before any command runs,
        # it costs nothing; a copy into the created container cost 40 ms of a 160 ms start.
        with open("/etc/hosts", "w") as hosts:
            hosts.write(config["hosts"])
    if config.get("overlay"):
        owner = (config["user"]["uid"], config["user"]["gid"]) if config.get("user") else (0, 0)
        _mount_overlay(config["overlay"], config["workdir"], owner)
    if config.get("copy_in"):
        _copy_in(config["copy_in"], config["workdir"])
    user = _resolve_user(config.get("user"))
    if os.getuid() == 0 and user is not None:
        os.setgroups([])
        _restrict_capabilities(SUPERVISOR_CAPS)
        if user[0] == 0:
            # Commands share uid 0: give the supervisor a saved uid they do not have.
            os.setresuid(0, 0, SUPERVISOR_SAVED_UID)
    elif os.getuid() == os.geteuid() and user is not None and user[0] == os.getuid():
        user = None  # already the command user (the local "copy" layout)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphans come here (pid 1 has that anyway)
    if not _prctl(PR_SET_DUMPABLE, 0):
        raise OSError(errno.EPERM, "cannot make the supervisor undumpable (no ctypes?)")
    supervisor = Supervisor(config, user)
    with contextlib.suppress(OSError, RuntimeError):  # an image without the workdir: make it, if allowed
        if not os.path.isdir(supervisor.workdir):
            supervisor.as_user(_makedirs_op, supervisor.workdir)
    return supervisor


def main():
    # pid 1 gets a signal from inside its namespace only if it has a handler: none here.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # Commands see SIGPIPE as usual; the supervisor wants EPIPE instead (ignored: no handler).
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    config = json.loads(sys.argv[1])
    out = sys.stdout
    if os.getpid() != 1:
        out.write(json.dumps({"error": "the supervisor must be pid 1 of its own pid namespace", "kind": "setup"}))
        out.write("\n")
        out.flush()
        return 2
    if config.get("standby"):
        # A sandbox started ahead of its fork (the host's `prefork`): its layers are bound
        # already, the snapshot layer filled only once the fork happens, so nothing is
        # mounted before the host sends the parent's state (cwd, exports). EOF: not used.
        out.write(json.dumps({"standby": True}) + "\n")
        out.flush()
        line = sys.stdin.readline()
        if not line:
            return 0
        config["state"] = json.loads(line).get("state")
    try:
        supervisor = setup(config)
        supervisor.spawn()
    except (OSError, SystemExit, ImportError) as exc:
        out.write(json.dumps({"error": f"sandbox setup failed: {exc}", "kind": "setup"}) + "\n")
        out.flush()
        return 2
    out.write(json.dumps({"ready": True, "uid": os.getuid(), "pid": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            response = handle(supervisor, request)
        except OSError as exc:
            response = {"error": f"{type(exc).__name__}: {exc}", "kind": "os", "errno": exc.errno}
        except RuntimeError as exc:
            response = {"error": str(exc), "kind": "supervisor"}
        out.write(json.dumps(response) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
