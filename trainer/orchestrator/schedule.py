"""What to run next and what the learner eats: the orchestrator's bookkeeping, without Ray.

A `Schedule` turns tasks into episode jobs, takes their results, and forms learner batches.
It is plain Python (no Ray, no torch) so its rules are tested directly and its whole state
goes into a checkpoint as JSON.

Two ways to feed the learner, one code path:

- **Gated** (`gated=True`): batch `b` is a fixed set of job ids, pinned to policy version
  `max(0, b - max_staleness)`, dispatched once that version is published and consumed whole,
  in id order. With `max_staleness=0` this is the synchronous baseline (generate all, then
  train); with `max_staleness >= 1` generation of the next batches overlaps training, and
  the run is still bitwise reproducible (the deterministic mode).
- **Streaming** (`gated=False`): jobs start whenever a rollout slot is free, always on the
  newest weights (in-flight episodes pick up new weights between turns: partial rollouts);
  the learner takes complete groups in the order they finish, as soon as `batch_trajectories`
  (or `batch_tokens`) are ready. No batch waits for its slowest episode.

Staleness of a trajectory = the learner's version when it is consumed minus the oldest
version that produced any of its tokens. `max_staleness` is a hard bound on what the learner
consumes: a trajectory over it is dropped and counted (`stale_dropped`). Under
`staleness_policy="wait"` (AReaL's admission rule) new groups also wait until
`started_groups < (version + max_staleness + 1) * groups_per_batch`, and each refusal is
counted (`admission_waits`); under `"drop"` generation never waits.

Faults: an infrastructure error (sandbox died, grading failed, worker crashed or hung) puts
the job back in the queue with the same seed, up to `max_attempts`; after that it is
dropped and counted, never scored 0.
"""

from __future__ import annotations

import dataclasses
import random
from collections import deque
from dataclasses import dataclass, field

from trainer.inference.trajectory import Trajectory


@dataclass
class EpisodeJob:
    job_id: int
    group: int
    task_id: str
    family: str
    seed: int
    batch: int
    """The batch this job belongs to (gated mode); its group's nominal batch otherwise."""
    version: int | None = None
    """Pinned policy version (gated mode); None: the newest weights, turn by turn."""
    attempt: int = 0


@dataclass
class EpisodeResult:
    job_id: int
    trajectories: list[Trajectory] = field(default_factory=list)
    error: str = ""
    """Non-empty for an infrastructure failure: the job is retried, never scored."""
    seconds: float = 0.0
    worker: int = -1


@dataclass
class Batch:
    step: int
    trajectories: list[Trajectory]
    ids: list[str]
    staleness: list[int]
    stale_dropped: int


class TaskPicker:
    """Round robin over the tasks, or PAC's Thompson sampling over families (`pac`).
    `pick()` returns a task id; its state (RNG and PAC posterior) is JSON-able."""

    def __init__(self, tasks: list[tuple[str, str]], *, seed: int, pac=None) -> None:
        self.tasks = tasks  # (task id, family)
        self.by_family: dict[str, list[str]] = {}
        for task_id, family in tasks:
            self.by_family.setdefault(family, []).append(task_id)
        self.pac = pac
        self.rng = random.Random(seed)
        self.picked = 0

    def pick(self) -> tuple[str, str]:
        if self.pac is None:
            choice = self.tasks[self.picked % len(self.tasks)]
        else:
            family = next(iter(self.pac.allocate(1, self.rng)))
            members = self.by_family[family]
            choice = (members[self.rng.randrange(len(members))], family)
        self.picked += 1
        return choice

    def observe(self, trajectories: list[Trajectory], advantages: dict[str, float]) -> None:
        """Tell the curriculum how a learner step went: each trajectory's mean advantage over
        its policy tokens (`advantages`, by trajectory id, from every learner rank; 0 for one
        the learner left out) and its reward."""
        if self.pac is None:
            return
        for family in sorted({t.family for t in trajectories}):
            mine = [t for t in trajectories if t.family == family]
            self.pac.update(family, [advantages.get(t.trajectory_id, 0.0) for t in mine], [t.reward for t in mine])

    def state_dict(self) -> dict:
        version, internal, gauss = self.rng.getstate()
        return {
            "picked": self.picked,
            "rng": [version, list(internal), gauss],
            **({"pac": self.pac.state_dict()} if self.pac is not None else {}),
        }

    def load_state_dict(self, state: dict) -> None:
        self.picked = state["picked"]
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        if self.pac is not None and "pac" in state:
            self.pac.load_state_dict(state["pac"])


def trajectory_to_dict(trajectory: Trajectory) -> dict:
    return dataclasses.asdict(trajectory)


def trajectory_from_dict(data: dict) -> Trajectory:
    return Trajectory(**data)


def staleness(trajectory: Trajectory, version: int) -> int:
    """How many versions behind `version` the oldest policy token of `trajectory` is."""
    produced = [v for v, policy in zip(trajectory.versions, trajectory.policy_mask, strict=True) if policy]
    return version - min(produced) if produced else 0


class Schedule:
    def __init__(
        self,
        picker: TaskPicker,
        *,
        groups_per_batch: int,
        group_size: int = 1,
        gated: bool = True,
        max_staleness: int = 0,
        staleness_policy: str = "wait",
        batch_tokens: int = 0,
        max_attempts: int = 3,
        seed: int = 0,
    ) -> None:
        if staleness_policy not in ("wait", "drop"):
            raise ValueError(f"staleness_policy must be 'wait' or 'drop', not {staleness_policy!r}")
        self.picker = picker
        self.groups_per_batch = groups_per_batch
        self.group_size = group_size
        self.gated = gated
        self.max_staleness = max_staleness
        self.staleness_policy = staleness_policy
        self.batch_tokens = batch_tokens
        self.max_attempts = max_attempts
        self.seed = seed
        self.next_group = 0
        self.taken = 0
        """Batches handed to the learner so far."""
        self.steps_done = 0
        """Learner steps finished (the weights after them are published)."""
        self.jobs: dict[int, EpisodeJob] = {}
        """Created and not yet finished (queued or running)."""
        self.queue: deque[int] = deque()
        self.running: set[int] = set()
        self.groups: dict[int, dict[int, list[Trajectory] | None]] = {}
        """Per group still being collected: member job id -> trajectories (None: dropped)."""
        self.ready: list[tuple[int, list[Trajectory]]] = []
        """Complete groups, in the order they completed, not yet consumed."""
        self.consumed: list[list[str]] = []
        self.dropped: list[str] = []
        """Ids of trajectories dropped for staleness (infrastructure drops have no trajectory)."""
        self._waiting_since = -1
        self.counters = {"infra_retries": 0, "infra_dropped": 0, "stale_dropped": 0, "admission_waits": 0}

    @property
    def batch_trajectories(self) -> int:
        return self.groups_per_batch * self.group_size

    # -- creating and dispatching jobs --------------------------------------------------------
    def _create_group(self, batch: int, version: int | None) -> None:
        group = self.next_group
        self.next_group += 1
        task_id, family = self.picker.pick()
        members = [group * self.group_size + m for m in range(self.group_size)]
        for job_id in members:
            self.jobs[job_id] = EpisodeJob(
                job_id=job_id,
                group=group,
                task_id=task_id,
                family=family,
                seed=self.seed * 1_000_003 + job_id,
                batch=batch,
                version=version,
            )
            self.queue.append(job_id)
        self.groups[group] = dict.fromkeys(members, _PENDING)

    def _admit(self, version: int, free_slots: int) -> None:
        """Create the groups that `steps_done` allows; gated batches are pinned to `version`,
        the weights published after the learner's `steps_done`-th step."""
        if self.gated:
            # Batch b starts once b - max_staleness learner steps are done, on their weights.
            while self.next_group // self.groups_per_batch <= self.steps_done + self.max_staleness:
                batch = self.next_group // self.groups_per_batch
                for _ in range(self.groups_per_batch):
                    self._create_group(batch, version)
            return
        while len(self.queue) < free_slots:
            if self.staleness_policy == "wait" and self.next_group >= (
                (self.steps_done + self.max_staleness + 1) * self.groups_per_batch
            ):
                if self._waiting_since != self.steps_done:  # count each hold once, not each poll
                    self._waiting_since = self.steps_done
                    self.counters["admission_waits"] += 1
                return
            self._create_group(self.next_group // self.groups_per_batch, None)

    def next_jobs(self, version: int, free_slots: int) -> list[EpisodeJob]:
        """Up to `free_slots` jobs to start now (retries first, then new groups). Call it
        after every `learner_done`, even with no free slot: gated batches are pinned then."""
        self._admit(version, free_slots)
        started = []
        while self.queue and len(started) < free_slots:
            job = self.jobs[self.queue.popleft()]
            self.running.add(job.job_id)
            started.append(job)
        return started

    def learner_done(self) -> None:
        """The learner finished the step on the last batch taken (applied or skipped)."""
        self.steps_done += 1

    # -- results ------------------------------------------------------------------------------
    def finish(self, result: EpisodeResult) -> str:
        """Record a result; returns `done`, `retry` or `dropped`."""
        job = self.jobs[result.job_id]
        self.running.discard(job.job_id)
        if result.error:
            return self.fail(job.job_id)
        for index, trajectory in enumerate(result.trajectories):
            trajectory.trajectory_id = str(job.job_id) if len(result.trajectories) == 1 else f"{job.job_id}.{index}"
            trajectory.family = job.family
            trajectory.attempt = job.attempt
            trajectory.episode_seconds = round(result.seconds, 3)
            trajectory.group_id = str(job.group)
        self._complete(job, result.trajectories)
        return "done"

    def fail(self, job_id: int, *, blame: bool = True) -> str:
        """An infrastructure failure of a job: requeue it (same seed) or, after
        `max_attempts`, drop it. `blame=False` (it ran beside a crashed job) does not count
        as an attempt."""
        job = self.jobs[job_id]
        self.running.discard(job_id)
        if blame:
            job.attempt += 1
        if job.attempt < self.max_attempts:
            if blame:
                self.counters["infra_retries"] += 1
            self.queue.appendleft(job_id)
            return "retry"
        self.counters["infra_dropped"] += 1
        self._complete(job, None)
        return "dropped"

    def _complete(self, job: EpisodeJob, trajectories: list[Trajectory] | None) -> None:
        del self.jobs[job.job_id]
        members = self.groups[job.group]
        members[job.job_id] = trajectories
        if all(value is not _PENDING for value in members.values()):
            del self.groups[job.group]
            collected = [t for value in members.values() if value for t in value]
            if collected or self.gated:
                self.ready.append((job.group, collected))

    # -- learner batches ----------------------------------------------------------------------
    def _drop_stale(self, version: int) -> int:
        """Remove finished trajectories already over the staleness bound (they only get
        older); their ids are kept in `dropped`."""
        dropped, ready = 0, []
        for group, trajectories in self.ready:
            fresh = []
            for trajectory in trajectories:
                if staleness(trajectory, version) > self.max_staleness:
                    self.dropped.append(trajectory.trajectory_id)
                    dropped += 1
                else:
                    fresh.append(trajectory)
            if fresh or self.gated:
                ready.append((group, fresh))
        self.ready = ready
        self.counters["stale_dropped"] += dropped
        return dropped

    def take_batch(self, version: int) -> Batch | None:
        """The next learner batch, or None while it is not complete yet. `version` is the
        learner's version now: staleness is measured against it."""
        dropped = self._drop_stale(version)
        if self.gated:
            lo, hi = self.taken * self.groups_per_batch, (self.taken + 1) * self.groups_per_batch
            mine = [entry for entry in self.ready if lo <= entry[0] < hi]
            if len(mine) < self.groups_per_batch:
                return None
            mine.sort(key=lambda entry: entry[0])
        else:  # complete groups in the order they finished, until the batch is full
            mine, count, tokens = [], 0, 0
            for entry in self.ready:
                mine.append(entry)
                count += len(entry[1])
                tokens += sum(len(t) for t in entry[1])
                if count >= self.batch_trajectories or (self.batch_tokens and tokens >= self.batch_tokens):
                    break
            else:
                return None
        taken = {id(entry) for entry in mine}
        self.ready = [entry for entry in self.ready if id(entry) not in taken]
        kept = [t for _, trajectories in mine for t in trajectories]
        lags = [staleness(t, version) for t in kept]
        for trajectory, lag in zip(kept, lags, strict=True):
            trajectory.staleness = lag
        ids = [t.trajectory_id for t in kept]
        self.consumed.append(ids)
        self.taken += 1
        return Batch(self.taken, kept, ids, lags, dropped)

    # -- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything needed to go on: jobs not finished (running ones are restarted with the
        same seed), groups half collected, finished groups not yet consumed, what was consumed."""
        return {
            "next_group": self.next_group,
            "taken": self.taken,
            "steps_done": self.steps_done,
            "jobs": [dataclasses.asdict(self.jobs[j]) for j in sorted(self.jobs)],
            "queue": [*self.queue],
            "groups": {str(g): {str(j): _encode(v) for j, v in members.items()} for g, members in self.groups.items()},
            "ready": [[g, [trajectory_to_dict(t) for t in ts]] for g, ts in self.ready],
            "consumed": self.consumed,
            "dropped": self.dropped,
            "counters": self.counters,
            "picker": self.picker.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.next_group = state["next_group"]
        self.taken = state["taken"]
        self.steps_done = state["steps_done"]
        self.jobs = {job["job_id"]: EpisodeJob(**job) for job in state["jobs"]}
        # Jobs that were running when the checkpoint was written run again, before the queue.
        running = [j for j in sorted(self.jobs) if j not in set(state["queue"])]
        self.queue = deque([*running, *state["queue"]])
        self.running = set()
        self.groups = {
            int(g): {int(j): _decode(v) for j, v in members.items()} for g, members in state["groups"].items()
        }
        self.ready = [(g, [trajectory_from_dict(t) for t in ts]) for g, ts in state["ready"]]
        self.consumed = state["consumed"]
        self.dropped = state["dropped"]
        self.counters = dict(state["counters"])
        self.picker.load_state_dict(state["picker"])


class _Pending:
    def __repr__(self) -> str:
        return "PENDING"


_PENDING = _Pending()


def _encode(value) -> object:
    if value is _PENDING:
        return "pending"
    return None if value is None else [trajectory_to_dict(t) for t in value]


def _decode(value) -> object:
    if value == "pending":
        return _PENDING
    return None if value is None else [trajectory_from_dict(t) for t in value]
