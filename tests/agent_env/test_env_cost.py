"""`ToolEnv.cost`: where an episode's sandbox time went, exact under a fake clock (real
sandboxes and grading; only the clock is fake), and warm starts from a pool."""

from agent_env import SandboxCost, ToolEnv, gold_actions, grading_spec_for, sandbox_spec_for
from agent_env.tools import ToolCall, format_tool_call
from sandboxes import SandboxPool, make_sandbox
from tasks import builtin_tasks
from tests.agent_env.clocked import FORK_S, SLOW_S, START_S, Clock, clocked_factory
from tests.conftest import needs_bwrap

pytestmark = needs_bwrap
TASK = builtin_tasks()[0]
FINISH = format_tool_call(ToolCall("finish"))


def bash(command: str) -> str:
    return format_tool_call(ToolCall("execute_bash", {"command": command}))


def test_start_tool_calls_grading_and_lifetime_are_booked_apart():
    clock = Clock()
    env = ToolEnv(TASK, sandbox_factory=clocked_factory(clock), clock=clock)
    env.reset()  # t = 0 -> 3: the agent's sandbox starts
    assert env.cost == SandboxCost(start="cold", start_seconds=START_S)
    env.step(bash("echo working #slow"))  # t = 3 -> 5
    env.step(bash("echo quick"))  # no time
    # t = 5 -> 8.5: grading starts a sandbox of its own and runs the tests in a fork of it
    # (as every canary twin runs); the empty patch fails its verdict run, so no twin runs
    _, _, terminated, _, info = env.step(FINISH)
    assert terminated and info["end"] == "finish"
    env.close()  # the agent's sandbox lived from 0 to 8.5
    grading = START_S + FORK_S
    # Of grading: the start is setup, the verdict run's fork is the test run's part.
    assert env.cost == SandboxCost(
        start="cold", start_seconds=START_S, tool_seconds=SLOW_S, grading_seconds=grading,
        lifetime_seconds=START_S + SLOW_S + grading, grading_setup_seconds=START_S, test_run_seconds=FORK_S,
    )  # fmt: skip
    assert env.cost.sandbox_seconds == 8.5 + 3.5  # its lifetime, and grading's sandboxes beside it
    env.close()
    assert env.cost.lifetime_seconds == 8.5  # closing twice books nothing twice


def test_a_passing_grading_books_its_verdict_run_and_its_canaries_apart():
    clock = Clock()
    env = ToolEnv(TASK, sandbox_factory=clocked_factory(clock), clock=clock)
    env.reset()  # t = 0 -> 3
    patch, finish = gold_actions(TASK)
    env.step(patch)
    _, reward, _, _, info = env.step(finish)
    env.close()
    twins = len(info["grade"].canaries)
    assert reward == 1.0 and twins == len(TASK.grading.fail_to_pass)  # one per test function
    # The grading sandbox's start is setup; the verdict run's fork is the test run's, one fork
    # per twin the canaries'; the runs and the closes take no time on this clock.
    assert (env.cost.grading_setup_seconds, env.cost.canary_seconds) == (START_S, FORK_S * twins)
    assert (env.cost.test_run_seconds, env.cost.grading_teardown_seconds, env.cost.close_seconds) == (FORK_S, 0, 0)
    assert env.cost.grading_seconds == START_S + FORK_S * (1 + twins)
    assert info["grade"].seconds == {
        "start": START_S, "setup": 0.0, "tests": FORK_S, "canaries": FORK_S * twins, "teardown": 0.0,
    }  # fmt: skip


def test_a_fork_starts_a_cost_of_its_own():
    clock = Clock()
    with ToolEnv(TASK, sandbox_factory=clocked_factory(clock), clock=clock) as env:
        env.reset()
        env.step(bash("echo before the fork #slow"))
        child = env.fork()  # t = 5 -> 5.5
        with child:
            assert child.cost == SandboxCost(start="fork", start_seconds=FORK_S)
            child.step(bash("echo in the child #slow"))  # t = 5.5 -> 7.5
            assert child.cost.tool_seconds == SLOW_S and env.cost.tool_seconds == SLOW_S
        assert child.cost.lifetime_seconds == 7.5 - 5.0  # asked for at 5, closed at 7.5
        assert env.cost.start == "cold" and env.cost.start_seconds == START_S


def test_an_episode_from_a_pool_starts_warm_and_grades_in_a_pooled_sandbox():
    with SandboxPool(make_sandbox, size=2) as pool:
        first = ToolEnv(TASK, sandbox_factory=pool)
        first.reset()
        assert first.cost.start == "cold"  # nothing was ready
        first.step(format_tool_call(ToolCall("finish")))  # grading asks for its own spec: cold too
        first.close()
        assert pool.counts == {
            "warm_starts": 0,
            "cold_starts": 2,
            "background_starts": pool.counts["background_starts"],
        }
        for spec in (sandbox_spec_for(TASK), grading_spec_for(TASK)):
            assert pool.wait_ready(spec, timeout=120)
        with ToolEnv(TASK, sandbox_factory=pool) as env:
            env.reset()
            assert env.cost.start == "warm"
            patch, finish = gold_actions(TASK)
            env.step(patch)
            _, reward, terminated, _, info = env.step(finish)
            assert (reward, terminated, info["resolved"]) == (1.0, True, True)  # a pooled sandbox grades alike
        assert pool.counts["warm_starts"] == 2  # the episode's sandbox and its grading's
