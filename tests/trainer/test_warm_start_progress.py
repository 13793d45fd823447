"""The warm start and the critic pre-training taken in chunks (the recipe draws a progress bar
between them) make exactly the updates of one chunk: the same losses, the same weights."""

import pytest
import torch

from tests.trainer.test_learner import make_learner, make_trajectory, pretrain_critic, warm_start
from trainer.inference.models import ValueModel, load_policy
from trainer.recipes.phases import chunked_steps


def tiny_learner():
    policy = load_policy("tiny", seed=0)
    return make_learner(policy, ValueModel.from_policy(policy), lr=1e-3, critic_lr=1e-3)


def state(learner) -> dict[str, torch.Tensor]:
    models = {"policy": learner.policy, "critic": learner.critic}
    return {f"{m}.{k}": v.detach().clone() for m, model in models.items() for k, v in model.state_dict().items()}


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


class Bar:
    """What `chunked_steps` needs of a tqdm bar, recording each advance."""

    def __init__(self) -> None:
        self.updates: list[int] = []
        self.postfix: dict = {}

    def update(self, n: int) -> None:
        self.updates.append(n)

    def set_postfix(self, refresh: bool = True, **values) -> None:
        self.postfix = values


def test_a_chunked_warm_start_equals_the_one_chunk_warm_start_bit_for_bit():
    demos = [make_trajectory(load_policy("tiny", seed=0), 1.0, seed=s) for s in (3, 4)]
    whole = tiny_learner()
    expected = warm_start(whole, demos, steps=7, lr=1e-2)

    chunked = tiny_learner()
    chunked.begin_warm_start(demos, lr=1e-2)
    losses = [loss for n in (1, 3, 2, 1) for loss in chunked.warm_start_steps(n)]
    chunked.end_warm_start()

    assert len(losses) == 7 and losses == expected  # exact floats, every step
    assert losses[-1] < losses[0]  # it did train
    assert chunked.version == whole.version == 1
    assert_same(state(chunked), state(whole))  # policy, and the critic restarted from it
    assert not chunked.critic_optimizer.state  # the critic's optimizer starts fresh after it


def test_chunked_steps_advances_the_bar_after_each_chunk_with_the_same_losses():
    demos = [make_trajectory(load_policy("tiny", seed=0), 1.0, seed=3)]
    whole = tiny_learner()
    expected = warm_start(whole, demos, steps=5, lr=1e-2)

    chunked, bar = tiny_learner(), Bar()
    chunked.begin_warm_start(demos, lr=1e-2)
    losses = chunked_steps(chunked.warm_start_steps, 5, bar, chunks=2)
    chunked.end_warm_start()

    assert losses == expected
    assert bar.updates == [2, 2, 1] and bar.postfix == {"loss": f"{expected[-1]:.4f}"}
    assert_same(state(chunked), state(whole))


def test_chunked_critic_pretraining_equals_the_one_chunk_pretraining_bit_for_bit():
    whole = tiny_learner()
    trajectories = [make_trajectory(whole.policy, r, s) for s, r in enumerate([1.0, 0.0])]
    expected = pretrain_critic(whole, trajectories, steps=5)

    chunked = tiny_learner()
    chunked.begin_critic_pretraining(trajectories)
    losses = chunked_steps(chunked.critic_pretraining_steps, 5, Bar(), chunks=3)
    chunked.end_critic_pretraining()

    # The value head starts at zero: 0.5 * (1 - 0)^2 on the rewarded half of the tokens.
    assert losses == expected and expected[0] == 0.25 and expected[-1] < expected[0]
    assert_same(state(chunked), state(whole))


def test_steps_without_a_begin_are_refused():
    learner = tiny_learner()
    with pytest.raises(RuntimeError, match="begin_warm_start"):
        learner.warm_start_steps(1)
    with pytest.raises(RuntimeError, match="begin_warm_start"):
        learner.end_warm_start()
    with pytest.raises(RuntimeError, match="begin_critic_pretraining"):
        learner.critic_pretraining_steps(1)


def test_log_lines_while_a_progress_bar_is_open_go_above_it(capsys):
    """A log line printed inside `progress_bar` is written through `tqdm.write`: on a line
    of its own (the bar cleared first, then drawn again below), never after the bar's text."""
    import logging
    import sys

    from trainer.recipes.phases import progress_bar

    handler = logging.StreamHandler(sys.stderr)  # what `setup_logging` installs, on the capture
    root, log = logging.getLogger(), logging.getLogger("trainer.test_progress")
    root.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        with progress_bar(2, "phase", "step") as bar:
            bar.update(1)
            log.info("a line in between")
            bar.update(1)
        assert handler in root.handlers  # put back when the bar closed
    finally:
        root.removeHandler(handler)
    segments = capsys.readouterr().err.split("\r")
    assert any(s.startswith("a line in between\n") for s in segments), segments
    assert segments[-1].startswith("phase: 100%|") and segments[-1].endswith("\n")  # closed
