"""Continuous batching of one worker's concurrent episodes' turns (`rollout.batch_turns`).

The worker's episode threads each ask for their next turn; one driver thread decodes every
turn that can share a decode (`trainer.inference.engines.hf.Decode`), each from its own
cached prefix and with its own seed, so an episode's tokens do not depend on which others
shared its batch. The batcher sees its worker only through three things handed to it: the
lock that guards the engine, the engine for a pinned version, and the newest published
version.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class _Turn:
    """One episode's request for its next turn, and its answer."""

    def __init__(self, pinned: int | None, prompt: list[int], kwargs: dict) -> None:
        self.pinned = pinned
        self.prompt = prompt
        self.seed = kwargs.get("seed")
        self.budget = kwargs["max_new_tokens"]
        self.temperature = kwargs.get("temperature", 1.0)
        self.stop_token_ids = tuple(kwargs.get("stop_token_ids", ()))
        self.shape = (pinned, self.temperature, self.stop_token_ids)
        """What turns decoded together must share: the pinned version and the sampling."""
        self.generation = None
        self.error: BaseException | None = None
        self.done = False


class TurnBatcher:
    """Continuous batching of a worker's concurrent episodes' turns (no timer, no barrier).

    One driver thread (started with the first turn) runs the worker's current `Decode` (the
    hf engine's continuous batch): before every step it admits the turns queued meanwhile,
    in order, as long as they can share the decode (the same pinned version and sampling
    settings; for the live version, only while no newer weights have arrived, so a
    generation has one version); then it steps, and each row that finished hands its
    episode its generation at once. A turn that cannot join waits until the decode drains,
    and the next decode starts from the newest weights. Nothing waits for a batch to fill:
    a lone turn decodes at once, alone. One thread runs every forward, so the episodes'
    threads never each start a team of math threads of their own."""

    def __init__(
        self,
        lock: threading.RLock,
        engine_for: Callable[[int | None], object],
        newest_version: Callable[[], int | None],
    ) -> None:
        """`lock` guards the worker's engines (held for every step); `engine_for(pinned)`
        gives the engine of a pinned version (None: the live one); `newest_version()` the
        newest weights published to the worker (None: none yet)."""
        self._lock = lock
        self._engine_for = engine_for
        self._newest_version = newest_version
        self._ready = threading.Condition()
        self._queue: list[_Turn] = []
        self._driver: threading.Thread | None = None
        self._decode = None
        self._shape: tuple | None = None
        self._live: dict[int, _Turn] = {}
        """The decode's rows (by id) and their turns."""
        self.steps = 0
        """Decode steps run (one forward each)."""
        self.row_steps = 0
        """Rows decoded over those steps (row_steps / steps: the mean batch)."""
        self.turns = 0
        """Turns answered."""

    def generate(self, pinned: int | None, prompt: list[int], kwargs: dict):
        turn = _Turn(pinned, prompt, kwargs)
        with self._ready:
            self._queue.append(turn)
            if self._driver is None:
                self._driver = threading.Thread(target=self._drive, name="turn-batcher", daemon=True)
                self._driver.start()
            self._ready.notify_all()
            while not turn.done:
                self._ready.wait()
        if turn.error is not None:
            raise turn.error
        return [turn.generation]

    def _drive(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self.decoding():
                    self._ready.wait()
            try:
                self._step()
            except BaseException as exc:  # a bug, not the engine (`_step` hands those to turns)
                with self._ready:
                    for turn in [*self._queue, *self._live.values()]:
                        turn.error, turn.done = exc, True
                    self._queue, self._live, self._decode = [], {}, None
                    self._ready.notify_all()

    def decoding(self) -> bool:
        """Whether rows are mid-decode on the worker's engine (read under its lock)."""
        return self._decode is not None and bool(self._decode.rows)

    def release(self) -> None:
        """Drop the drained decode (it holds the engine and its batch cache) before the
        worker sleeps; called under the worker's lock with no episode running."""
        if self.decoding():
            raise RuntimeError("the turn batcher is mid-decode: a worker sleeps only when idle")
        self._decode, self._shape = None, None

    def _admissible(self, queued: list[_Turn]) -> list[_Turn]:
        """The queued turns, in order, that join the current decode (or start the next one).
        Called under the worker's lock."""
        if self._decode is None or not self._decode.rows:
            from trainer.inference.engines.hf import Decode

            first = queued[0]
            engine = self._engine_for(first.pinned)
            self._decode = Decode(engine, temperature=first.temperature, stop_token_ids=first.stop_token_ids)
            self._shape = first.shape
        newest = self._newest_version()
        joining = []
        for turn in queued:
            newer = turn.pinned is None and newest is not None and newest > self._decode.engine.version
            if turn.shape != self._shape or newer:
                break  # in order: the decode drains, then this turn starts the next
            joining.append(turn)
        return joining

    def _step(self) -> None:
        import torch

        with self._ready:
            queued = list(self._queue)
        failed: list[tuple[_Turn, BaseException]] = []
        finished = []
        with self._lock:
            try:
                joining = self._admissible(queued) if queued else []
            except BaseException as exc:  # e.g. weights that never arrived: the first turn's error
                joining, failed = [], [(queued[0], exc)]
            with self._ready:
                self._queue = [t for t in self._queue if t not in joining and all(t is not f for f, _ in failed)]
            for turn in joining:
                try:
                    generator = torch.Generator().manual_seed(turn.seed) if turn.seed is not None else None
                    row = self._decode.add(turn.prompt, turn.budget, generator)
                    self._live[id(row)] = turn
                except BaseException as exc:
                    failed.append((turn, exc))
            if self._decode is not None and self._decode.rows:
                live = len(self._decode.rows)
                try:
                    finished = self._decode.step()
                except BaseException as exc:  # the engine failed: every row of the decode gets it
                    failed += [(turn, exc) for turn in self._live.values()]
                    self._live.clear()
                    self._decode = None
                self.steps += 1
                self.row_steps += live
        with self._ready:
            for row in finished:
                turn = self._live.pop(id(row))
                turn.generation, turn.done = row.generation, True
                self.turns += 1
            for turn, exc in failed:
                turn.error, turn.done = exc, True
            if finished or failed:  # only then has a waiter something to see (not every step)
                self._ready.notify_all()
