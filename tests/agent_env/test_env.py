import pytest

from agent_env import EnvCheckError, ToolEnv, check_env, gold_actions
from agent_env.tools import ToolCall, format_tool_call
from tasks import builtin_tasks
from tests.conftest import needs_bwrap

pytestmark = needs_bwrap
TASK = builtin_tasks()[0]


def bash(command: str) -> str:
    return format_tool_call(ToolCall("execute_bash", {"command": command}))


def test_reset_shows_the_issue_and_the_tools():
    with ToolEnv(TASK) as env:
        observation, info = env.reset(seed=3)
        assert TASK.problem_statement in observation
        assert [t["function"]["name"] for t in info["tools"]] == list(TASK.tools)
        assert info["task_id"] == TASK.id and info["seed"] == 3


@pytest.mark.parametrize("style", ["patch", "edit"])
def test_gold_actions_resolve_and_terminate(style):
    with ToolEnv(TASK) as env:
        env.reset()
        first, second = gold_actions(TASK, style=style)
        observation, reward, terminated, truncated, info = env.step(first)
        done = "[exit code: 0]" if style == "patch" else "has been edited"
        assert done in observation and reward == 0.0 and not (terminated or truncated)
        observation, reward, terminated, truncated, info = env.step(second)
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert info["resolved"] and info["end"] == "finish" and info["patch"].startswith("diff --git")


def test_finishing_without_a_fix_gives_zero():
    with ToolEnv(TASK) as env:
        env.reset()
        _, reward, terminated, _, info = env.step(format_tool_call(ToolCall("finish")))
        assert reward == 0.0 and terminated and not info["resolved"] and info["patch"] == ""


def test_malformed_calls_are_counted_observations_not_crashes():
    with ToolEnv(TASK, max_turns=5) as env:
        env.reset()
        observation, reward, terminated, truncated, info = env.step("no call here")
        assert observation.startswith("ERROR: No tool call") and "format_error" in info
        env.step("<tool_call>{broken</tool_call>")
        env.step(format_tool_call(ToolCall("str_replace_editor", {"command": "view", "path": "relative"})))
        assert env.stats.format_errors == 2 and env.stats.tool_errors == 1


def test_turn_limit_truncates_and_grades_the_work_so_far():
    with ToolEnv(TASK, max_turns=2) as env:
        env.reset()
        first, _ = gold_actions(TASK)
        _, _, terminated, truncated, _ = env.step(first)
        assert not (terminated or truncated)
        _, reward, terminated, truncated, info = env.step(bash("echo still working"))
        assert truncated and not terminated and info["end"] == "max_turns"
        assert reward == 1.0  # the fix was already in place when the limit hit


def test_a_streak_of_malformed_replies_ends_the_episode_and_grades_the_work_so_far():
    with ToolEnv(TASK, max_turns=10, max_format_errors=2) as env:
        env.reset()
        first, _ = gold_actions(TASK)
        env.step("garbage")  # one slip, then a good call: the streak starts again
        env.step(first)
        _, _, _, truncated, _ = env.step("more garbage")
        assert not truncated and env.stats.format_error_streak == 1
        _, reward, terminated, truncated, info = env.step("<tool_call>{broken")
        assert truncated and not terminated and info["end"] == "format_errors" and info["turns"] == 4
        assert reward == 1.0 and info["format_errors"] == 3  # the fix was in place: graded as it stands


def test_step_after_the_end_is_an_error():
    with ToolEnv(TASK) as env:
        env.reset()
        env.step(format_tool_call(ToolCall("finish")))
        with pytest.raises(RuntimeError, match="finished episode"):
            env.step(bash("ls"))


def test_fork_branches_are_independent():
    with ToolEnv(TASK) as env:
        env.reset()
        env.step(bash("echo base > marker.txt"))
        child = env.fork()
        try:
            child.step(bash("echo child > marker.txt"))
            assert env.step(bash("cat marker.txt"))[0].startswith("base")
            assert child.step(bash("cat marker.txt"))[0].startswith("child")
            assert child.stats.turns == 3 and env.stats.turns == 2
        finally:
            child.close()


def test_tool_env_passes_the_conformance_check():
    check_env(lambda: ToolEnv(TASK, max_turns=3))


def test_the_conformance_check_catches_a_broken_env():
    class NeverTruncates(ToolEnv):
        def step(self, action):
            observation, reward, terminated, truncated, info = super().step(action)
            return observation, reward, terminated, False, info

    with pytest.raises(EnvCheckError, match="turn limit"):
        check_env(lambda: NeverTruncates(TASK, max_turns=4), max_turn_check=6)


def test_transcript_records_what_the_agent_saw():
    with ToolEnv(TASK) as env:
        env.reset()
        env.step(bash("echo visible"))
        roles = [m["role"] for m in env.transcript]
        assert roles == ["system", "user", "assistant", "tool"]
        assert env.transcript[-1]["content"].startswith("visible")


def test_openai_style_actions_are_accepted():
    with ToolEnv(TASK) as env:
        env.reset()
        message = {
            "tool_calls": [
                {"type": "function", "function": {"name": "execute_bash", "arguments": '{"command": "echo hi"}'}}
            ]
        }
        assert env.step(message)[0].startswith("hi")


def _kill_sandbox_after_this_command(env: ToolEnv) -> None:
    """Kill the sandbox's machinery from outside, as a command that broke it would."""
    from tests.sandboxes.conftest import break_backend

    break_backend(env.sandbox)


def test_a_sandbox_the_agent_broke_is_its_own_zero():
    with ToolEnv(TASK) as env:
        env.reset()
        env.step(bash("echo working"))
        _kill_sandbox_after_this_command(env)
        observation, reward, terminated, truncated, info = env.step(bash("echo still there?"))
        assert observation.startswith("ERROR: the sandbox died")
        assert (reward, terminated, truncated) == (0.0, True, False)
        assert info["end"] == "agent_broke_sandbox" and info["reward_hack_blocked"] == ["agent_broke_sandbox"]
        assert info["resolved"] is False and info["patch"] == ""


def test_a_sandbox_that_dies_with_the_backend_is_an_infrastructure_error():
    from sandboxes import SandboxError, make_sandbox

    started = []

    def factory(spec):
        if started:  # the control sandbox cannot start: the backend itself is failing
            raise SandboxError("backend down")
        started.append(spec)
        return make_sandbox(spec)

    with ToolEnv(TASK, sandbox_factory=factory) as env:
        env.reset()
        _kill_sandbox_after_this_command(env)
        with pytest.raises(SandboxError, match="a fresh sandbox fails too: backend down"):
            env.step(bash("echo still there?"))
