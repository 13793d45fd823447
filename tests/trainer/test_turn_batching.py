"""Batched turns: the hf engine decodes several episodes' turns at once, each from its own
cached prefix and with its own seed, and a worker's `TurnBatcher` gathers the turns that
arrive while its engine is busy. Each episode must get what it would have got alone."""

import threading

import pytest
import torch

from bench.perf.rollout import BatchingWorker
from trainer.inference.engines.hf import HFEngine
from trainer.inference.models import load_policy
from trainer.orchestrator.turn_batching import TurnBatcher


def prompts(count: int = 4) -> list[list[int]]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randint(5, 2000, (40 + 7 * i,), generator=generator).tolist() for i in range(count)]


def alone(prompt: list[int], seed: int, temperature: float, max_new_tokens: int = 12, stop: tuple = ()):
    """The reference: one prompt, no prefix cache, its own seed."""
    engine = HFEngine(load_policy("tiny", seed=0), prefix_cache_size=0)
    return engine.generate(
        [prompt], max_new_tokens=max_new_tokens, temperature=temperature, stop_token_ids=stop, seed=seed
    )[0]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_batch_with_row_seeds_samples_what_each_row_samples_alone(temperature):
    engine = HFEngine(load_policy("tiny", seed=0))
    batch = prompts()
    seeds = [11, 12, 13, 14]
    together = engine.generate(batch, max_new_tokens=12, temperature=temperature, seeds=seeds)
    for prompt, seed, generation in zip(batch, seeds, together, strict=True):
        reference = alone(prompt, seed, temperature)
        assert generation.token_ids == reference.token_ids
        assert generation.logprobs == pytest.approx(reference.logprobs, abs=1e-5)
        assert generation.finish_reason == reference.finish_reason


def test_the_next_batched_turn_starts_from_each_rows_cached_prefix():
    engine = HFEngine(load_policy("tiny", seed=0))
    batch = prompts()
    first = engine.generate(batch, max_new_tokens=12, temperature=1.0, seeds=[1, 2, 3, 4])
    assert (engine.prompt_tokens, engine.reused_tokens) == (sum(map(len, batch)), 0)
    # Each episode's next prompt: its prompt, its reply, an observation.
    following = [p + g.token_ids + [7, 8, 9] for p, g in zip(batch, first, strict=True)]
    second = engine.generate(following, max_new_tokens=12, temperature=1.0, seeds=[5, 6, 7, 8])
    # Cached: each prompt and its reply but the last token (never fed to the model).
    assert engine.reused_tokens == sum(len(p) + 11 for p in batch)
    for prompt, seed, generation in zip(following, [5, 6, 7, 8], second, strict=True):
        assert generation.token_ids == alone(prompt, seed, 1.0).token_ids


def test_seeds_must_be_one_per_prompt():
    engine = HFEngine(load_policy("tiny", seed=0))
    with pytest.raises(ValueError, match="3 seeds for 4 prompts"):
        engine.generate(prompts(), max_new_tokens=2, seeds=[1, 2, 3])


class GatedBatcher(TurnBatcher):
    """Holds its second step until `waiting` more turns have queued: the first turn decodes
    one token alone, then the others join the running decode."""

    waiting = 0

    def _step(self):
        if self.steps == 1 and self.waiting:
            with self._ready:
                assert self._ready.wait_for(lambda: len(self._queue) == self.waiting, 60)
            self.waiting = 0
        super()._step()
        with self._ready:  # lets the test see the first step done
            self._ready.notify_all()


def test_turns_join_a_running_decode_and_each_leaves_when_done():
    batch = prompts(5)
    worker = BatchingWorker(HFEngine(load_policy("tiny", seed=0)), GatedBatcher)
    worker.batcher.waiting = 4
    budgets = [12, 12, 12, 12, 5]  # the last episode has less room left
    answers: dict[int, object] = {}

    def episode(index: int) -> None:
        kwargs = {"max_new_tokens": budgets[index], "temperature": 1.0, "stop_token_ids": (), "seed": 20 + index}
        answers[index] = worker.batcher.generate(None, batch[index], kwargs)[0]

    first = threading.Thread(target=episode, args=(0,))
    first.start()
    with worker.batcher._ready:  # the first turn decodes alone; the others arrive while it does
        assert worker.batcher._ready.wait_for(lambda: worker.batcher.steps >= 1, 60)
    others = [threading.Thread(target=episode, args=(i,)) for i in range(1, 5)]
    for thread in others:
        thread.start()
    for thread in [first, *others]:
        thread.join(120)
    # Turn 0 decodes steps 1-12; the others join at step 2: three finish at step 13, the
    # five-token one at step 6 (and leaves the batch).
    assert (worker.batcher.steps, worker.batcher.row_steps, worker.batcher.turns) == (13, 12 + 3 * 12 + 5, 5)
    for index in range(5):
        reference = alone(batch[index], 20 + index, 1.0, max_new_tokens=budgets[index])
        assert answers[index].token_ids == reference.token_ids
        assert answers[index].logprobs == pytest.approx(reference.logprobs, abs=1e-5)
    assert answers[4].finish_reason == "length" and len(answers[4].token_ids) == 5
    assert not worker.batcher.decoding() and not worker.batcher._queue


def test_rows_that_stop_early_leave_and_the_rest_decode_on():
    """A stop token ends one row mid-batch; the others' tokens are unchanged by its leaving."""
    engine = HFEngine(load_policy("tiny", seed=0))
    batch = prompts(3)
    reference = [alone(p, 30 + i, 1.0, max_new_tokens=16) for i, p in enumerate(batch)]
    stop = reference[0].token_ids[3]  # row 0 stops at its 4th token (or earlier, if it repeats)
    expected = [alone(p, 30 + i, 1.0, max_new_tokens=16, stop=(stop,)) for i, p in enumerate(batch)]
    together = engine.generate(batch, max_new_tokens=16, temperature=1.0, stop_token_ids=(stop,), seeds=[30, 31, 32])
    assert together[0].finish_reason == "stop" and len(together[0].token_ids) <= 4
    for generation, single in zip(together, expected, strict=True):
        assert generation.token_ids == single.token_ids
        assert generation.finish_reason == single.finish_reason


def test_an_engine_error_reaches_every_turn_of_the_decode():
    worker = BatchingWorker(HFEngine(load_policy("tiny", seed=0)), GatedBatcher)

    def broken(**kwargs):
        raise RuntimeError("engine died")

    worker.engine.model.forward = broken
    with pytest.raises(RuntimeError, match="engine died"):
        worker.batcher.generate(None, [5, 6, 7], {"max_new_tokens": 2, "seed": 1})
    assert not worker.batcher.decoding() and not worker.batcher._queue  # the next turn starts afresh
