"""Tree rollouts on real sandboxes: forks are independent, pruned branches stay as negatives,
budgets hold, and every branch equals an independent episode with the same sampled tokens."""

import pytest

from agent_env import ToolEnv, gold_actions
from tasks import builtin_tasks
from tests.conftest import needs_bwrap
from trainer.inference.engines.hf import HFEngine
from trainer.inference.engines.scripted import ReplayEngine, ScriptedEngine
from trainer.inference.models import load_policy, load_tokenizer
from trainer.inference.rollout import ChatFormat, HeuristicScorer, run_episode, run_tree
from trainer.inference.rollout.tree import Branch, is_degenerate

pytestmark = needs_bwrap
TASK = builtin_tasks()[0]


@pytest.fixture(scope="module")
def chat():
    return ChatFormat(load_tokenizer("tiny"))


def policy_turns(trajectory):
    """The (ids, logprobs) of each policy turn, in order."""
    turns, start = [], None
    for i, is_policy in enumerate([*trajectory.policy_mask, False]):
        if is_policy and start is None:
            start = i
        elif not is_policy and start is not None:
            turns.append((trajectory.token_ids[start:i], trajectory.logprobs[start:i]))
            start = None
    return turns


def grow(chat, **kwargs):
    engine = HFEngine(load_policy("tiny", seed=0))
    options = {"max_new_tokens": 12, "max_episode_tokens": 4000, "expand_every": 1, "children": 2, "max_branches": 4}
    options.update(kwargs)
    trajectories, stats = run_tree(
        ToolEnv(TASK, max_turns=3), engine, chat, HeuristicScorer(), tree_id="t", seed=0, **options
    )
    return trajectories, stats, engine


def test_branches_equal_independent_episodes_with_the_same_tokens(chat):
    trajectories, stats, engine = grow(chat)
    assert stats.branches == 4 and len(trajectories) == 4
    assert engine.reused_tokens > 0  # branches started from their parent's cached prefix
    for trajectory in trajectories:
        replay = ReplayEngine(policy_turns(trajectory))
        alone = run_episode(ToolEnv(TASK, max_turns=3), replay, chat, max_new_tokens=12, max_total_tokens=4000)
        assert alone.token_ids == trajectory.token_ids
        assert alone.policy_mask == trajectory.policy_mask
        assert alone.reward == trajectory.reward
        assert trajectory.group_id == "t"
    children = [t for t in trajectories if t.parent is not None]
    assert children and all(0 < t.branch_token < len(t) for t in children)
    assert stats.unique_tokens < stats.linear_tokens  # shared prefixes are counted once


def test_budgets_are_hard_limits(chat):
    trajectories, stats, _ = grow(chat, max_branches=3, max_total_tokens=2500)
    assert stats.branches <= 3 and len(trajectories) <= 3
    assert stats.unique_tokens <= 2500


def test_forked_sandboxes_do_not_share_writes(chat):
    """Gold first action, then the tree forks; one branch reverts the fix, the other finishes."""
    first, finish = gold_actions(TASK)
    revert = '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "git checkout -- ."}}\n</tool_call>'
    env = ToolEnv(TASK, max_turns=5)
    env.reset()
    env.step(first)
    child = env.fork()
    try:
        child.step(revert)
        _, reward_child, *_ = child.step(finish)
        _, reward_parent, *_ = env.step(finish)
    finally:
        child.close()
        env.close()
    assert (reward_parent, reward_child) == (1.0, 0.0)


def test_degenerate_branches_are_pruned_and_kept_as_negatives(chat):
    loop = '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "ls"}}\n</tool_call>'
    engine = ScriptedEngine([loop] * 20, chat.encode, chat.end_id)
    trajectories, stats = run_tree(
        ToolEnv(TASK, max_turns=10), engine, chat, HeuristicScorer(), tree_id="loop", max_new_tokens=64,
        max_episode_tokens=8000, expand_every=3, children=2, max_branches=1,
    )  # fmt: skip
    assert stats.pruned == 1
    (only,) = trajectories
    assert only.pruned and only.end == "pruned:repeated_action"
    assert only.reward == 0.0 and only.truncated  # graded as it stood: a negative, not dropped


def test_is_degenerate():
    branch = Branch(id="b", env=None, trajectory=None, actions=["a", "a", "a"], observations=["x", "y", "z"])
    assert is_degenerate(branch) == "repeated_action"
    branch = Branch(id="b", env=None, trajectory=None, actions=["a", "b", "c"], observations=["ERROR: x"] * 3)
    assert is_degenerate(branch) == "format_error_loop"
    branch.observations[-1] = "fine"
    assert is_degenerate(branch) is None


LOOP = '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "ls"}}\n</tool_call>'


@pytest.mark.parametrize(
    ("replies", "extra_tokens", "end"),
    [(gold_actions(TASK), 50_000, "finish"), ([LOOP] * 20, 150, "token_limit")],
    ids=["finish", "token_limit"],
)
def test_one_branch_tree_is_the_linear_episode(chat, replies, extra_tokens, end):
    """Both rollouts play the same turn (`rollout.turns`): a tree that never branches is the
    linear episode, field for field, whether the agent finishes or a token limit cuts it."""
    env = ToolEnv(TASK)
    prompt = len(chat.prompt_ids(env.system_prompt, "x", env.tools))
    limits = {"max_new_tokens": 64, "max_total_tokens": prompt + extra_tokens}
    linear = run_episode(
        ToolEnv(TASK, max_turns=10),
        ScriptedEngine(replies, chat.encode, chat.end_id, version=3),
        chat,
        seed=1,
        **limits,
    )
    (tree,), stats = run_tree(
        ToolEnv(TASK, max_turns=10), ScriptedEngine(replies, chat.encode, chat.end_id, version=3), chat,
        HeuristicScorer(), tree_id="one", max_new_tokens=limits["max_new_tokens"],
        max_episode_tokens=limits["max_total_tokens"], expand_every=100, max_branches=1, seed=1,
    )  # fmt: skip
    assert linear.end == end
    same = ("token_ids", "policy_mask", "logprobs", "versions", "turn_starts", "reward", "end", "terminated")
    same += ("truncated", "resolved", "patch", "turns", "format_errors", "reward_hack_blocked")
    for name in same:
        assert getattr(tree, name) == getattr(linear, name), name
    assert (tree.branch_id, tree.parent, tree.branch_token, tree.pruned) == ("one/0", None, 0, False)
    assert stats.branches == 1 and stats.unique_tokens == stats.linear_tokens == len(linear)
