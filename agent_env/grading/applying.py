"""Applying the agent's patch in the grading sandbox and judging the tree it leaves: what may
change (`agent_env.grading.protected`'s allowlist, decided on the result, never on hunk
headers), and putting back what may not. Nothing here runs a test (`agent_env.grading.runs`
does)."""

from __future__ import annotations

from collections.abc import Callable

from agent_env.grading.protected import ProtectionRule, result_reason
from sandboxes import ExecResult, Sandbox, SandboxError
from tasks import Task

GRADING_DIR = "/tmp/grading"
AGENT_PATCH = f"{GRADING_DIR}/agent.patch"
TEST_PATCH = f"{GRADING_DIR}/test.patch"


def protection_rule(task: Task) -> ProtectionRule:
    """The task's protected-path rule (`agent_env.protected`)."""
    workspace = task.workspace
    existing = frozenset(p.name for p in workspace.iterdir()) if workspace is not None and workspace.is_dir() else ()
    src = workspace / "src" if workspace is not None else None
    if src is not None and src.is_dir():
        existing |= frozenset(p.name for p in src.iterdir())
    return ProtectionRule(
        test_files=tuple(task.test_files()),
        protect=tuple(task.grading.protect),
        unprotect=tuple(task.grading.unprotect),
        existing_top=frozenset(existing),
        new_files_anywhere=task.verifier is not None,
    )


def pristine_text(task: Task) -> Callable[[str], str]:
    def read(path: str) -> str:
        if task.workspace is None:
            return ""
        try:
            return (task.workspace / path).read_text(errors="replace")
        except OSError:
            return ""

    return read


def run_fresh(sandbox: Sandbox, command: str, timeout: float = 60) -> ExecResult:
    """`command` as a fresh process in the grading sandbox (its exit status from the kernel)."""
    return sandbox.exec(command, timeout=timeout, fresh=True)


def git_apply(sandbox: Sandbox, path: str) -> ExecResult:
    """`git apply` of a patch file in the grading sandbox: strict (no fuzz), no hooks."""
    return run_fresh(sandbox, f"git -c core.hooksPath=/dev/null apply --whitespace=nowarn {path}")


def _git_changes(sandbox: Sandbox, paths: list[str]) -> list[tuple[str, str, str]]:
    """(status, new mode, path) of each path the agent's patch touched, as git sees the
    result against the pristine commit (a rename is a deletion and an addition)."""
    if not paths:
        return []
    listing = f"{GRADING_DIR}/touched"
    sandbox.write_file(listing, "\0".join(paths) + "\0")
    git = "git -c core.hooksPath=/dev/null --literal-pathspecs"
    result = run_fresh(
        sandbox,
        f"{git} add -f -A --pathspec-from-file={listing} --pathspec-file-nul >/dev/null 2>&1; "
        f"{git} diff --cached --raw -z --no-renames HEAD 2>/dev/null; {git} reset -q >/dev/null 2>&1",
    )
    fields = result.output.split("\0")
    changes = []
    for meta, path in zip(fields[::2], fields[1::2], strict=False):
        parts = meta.lstrip(":").split()
        if len(parts) >= 5:
            changes.append((parts[4][:1], parts[1], path))
    return changes


def _touched(sandbox: Sandbox, path: str) -> list[str] | None:
    """Every path `git apply` would touch for the patch file (git's own parse), or None
    when git cannot read it."""
    numstat = run_fresh(
        sandbox, f"git -c core.hooksPath=/dev/null apply --numstat -z --whitespace=nowarn {path} 2>/dev/null"
    )
    if numstat.exit_code != 0:
        return None
    paths: list[str] = []
    fields = numstat.output.split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        if not entry:
            i += 1
            continue
        counts = entry.split("\t")
        if len(counts) == 3 and counts[2] == "" and i + 2 < len(fields):  # a rename: old, new follow
            paths += [fields[i + 1], fields[i + 2]]
            i += 3
            continue
        paths.append(counts[-1])
        i += 1
    return [p for p in dict.fromkeys(paths) if p]


def _revert(sandbox: Sandbox, reverted: list[tuple[str, bool]]) -> None:
    """Put each (path, existed) back as the pristine commit has it."""
    listing = f"{GRADING_DIR}/revert"
    for path, existed in reverted:
        sandbox.write_file(listing, path)
        if existed:
            run_fresh(
                sandbox,
                f'p=$(cat {listing}); rm -rf -- "$p"; '
                f'git -c core.hooksPath=/dev/null --literal-pathspecs checkout -q HEAD -- "$p"',
            )
        else:
            run_fresh(sandbox, f'p=$(cat {listing}); rm -rf -- "$p"')


def _judge_tree(
    task: Task, sandbox: Sandbox, touched: list[str], pristine: frozenset[str]
) -> tuple[tuple[str, str], ...]:
    """Revert every change the allowlist refuses, judged on the tree after `git apply`."""
    rule = protection_rule(task)
    read = pristine_text(task)

    def read_both(path: str) -> tuple[str, str]:
        try:
            new = sandbox.read_file(path).decode(errors="replace")
        except SandboxError:
            new = ""
        return read(path), new

    dropped, reverted = [], []
    for status, mode, path in _git_changes(sandbox, touched):
        reason = result_reason(path, status=status, new_mode=mode, rule=rule, pristine=pristine, read_both=read_both)
        if reason is not None:
            dropped.append((path, reason))
            reverted.append((path, path in pristine))
    _revert(sandbox, reverted)
    return tuple(dropped)


def patch_bytes(patch: str) -> bytes:
    """The patch as git reads it: surrogates that stand for undecodable bytes become those
    bytes again; a lone surrogate that stands for none (any str can hold one) becomes '?'."""
    try:
        return patch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return patch.encode("utf-8", "replace")


def apply_agent_patch(task: Task, patch: str, sandbox: Sandbox) -> tuple[tuple[str, str], ...] | str:
    """Apply the agent's patch in the grading sandbox with `git apply` and revert what the
    allowlist refuses, judged on the tree (`_judge_tree`): the (path, reason) of each change
    dropped, or git's words when it refused the patch. An empty patch changes nothing."""
    if not patch.strip():
        return ()
    # Listings read without git's stderr: a warning (docker's sandbox user cannot read
    # $HOME/.config/git/ignore) would otherwise be glued to the first path.
    listing = run_fresh(sandbox, "git ls-tree -r -z --name-only HEAD 2>/dev/null").output
    pristine = frozenset(p for p in listing.split("\0") if p)
    sandbox.write_file(AGENT_PATCH, patch_bytes(patch))
    touched = _touched(sandbox, AGENT_PATCH)
    applied = git_apply(sandbox, AGENT_PATCH) if touched is not None else None
    if applied is None or applied.exit_code != 0:
        return (applied.output if applied is not None else "git cannot read the patch").strip()
    return _judge_tree(task, sandbox, touched or [], pristine)
