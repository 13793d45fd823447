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

Rollout allocation, per batch of `groups_per_batch` prompts with a budget of
`groups_per_batch * group_size` rollouts:

- **fixed** (`vigor=None`): every group gets `group_size` rollouts, all created at once.
- **VIGOR** (`vigor={m0, alpha, gamma, rounds}`, `trainer.algorithms.vigor`): a batch's groups
  are created together with `m0` rollouts each; when every rollout of that batch created so
  far has finished (played or dropped), `VigorAllocator.next_round` gets each group's rewards
  so far and adds rollouts to the highest-variance groups; once the allocator is done (the
  budget spent exactly) the batch's groups are complete, all at once, in group order. A
  round is an admission of new jobs for that batch only: other batches keep generating
  (streaming) and are admitted as before. In gated mode a batch's later rounds are pinned to
  the batch's version, and job ids are numbered per batch, so the run stays deterministic.
  With tree rollouts a job returns a variable number of branches, so a budget counted in
  trajectories could not be spent exactly: the config refuses vigor with `rollout.kind=tree`.

Job ids are numbered per batch: batch `b`'s jobs are `b * budget + 0, 1, ...` in creation
order (for fixed allocation: `group * group_size + member`, as before), and a job's seed is a
function of its id, so ids and seeds do not depend on timing in gated mode even when groups
have unequal sizes. Each learner batch reports its allocation (`allocation_metrics`).

Faults: an infrastructure error (sandbox died, grading failed, worker crashed or hung) puts
the job back in the queue with the same seed, up to `max_attempts`; after that it is
dropped and counted, never scored 0.

Over 450 lines on purpose: `Schedule`'s rules (admission, staleness, groups, VIGOR's rounds,
retries) and its checkpointed state are one piece of bookkeeping; every rule reads and
changes the same queues, so a split would spread one state over several modules.
"""

from __future__ import annotations

import dataclasses
import random
from collections import deque
from dataclasses import dataclass, field

from trainer.algorithms.vigor import VigorAllocator
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


def off_schedule_jobs(tasks: list, seeds: list[int], first_id: int) -> list[EpisodeJob]:
    """Jobs played outside RL (evaluation, critic pre-training; `Orchestrator.play`): the
    tasks in turn, one job per seed. Their ids (and groups) count down from `first_id`, which
    is negative: the schedule numbers its own jobs from 0 up, so the two never meet in a log
    line or a tree id. `batch=-1`: they belong to no learner batch."""
    if first_id >= 0:
        raise ValueError(f"first_id={first_id}: off-schedule ids are negative (the schedule's are >= 0)")
    picks = (tasks[i % len(tasks)] for i in range(len(seeds)))
    return [
        EpisodeJob(job_id=first_id - i, group=first_id - i, task_id=task.id, family=task.family, seed=seed, batch=-1)
        for i, (task, seed) in enumerate(zip(picks, seeds, strict=True))
    ]


@dataclass
class EpisodeResult:
    job_id: int
    trajectories: list[Trajectory] = field(default_factory=list)
    error: str = ""
    """Non-empty for an infrastructure failure: the job is retried, never scored."""
    seconds: float = 0.0
    worker: int = -1
    refused: bool = False
    """The worker turned the job away unstarted (it was asleep: lent to the learner, BiDiRL's
    hot switch); with `error` set. It goes back to the queue without using an attempt."""


@dataclass
class Batch:
    step: int
    trajectories: list[Trajectory]
    ids: list[str]
    staleness: list[int]
    stale_dropped: int
    allocation: dict[str, float] = field(default_factory=dict)
    """How the batch's rollouts were spread over its prompts (`allocation_metrics`)."""


def allocation_metrics(rollouts: list[int], rewards: list[list[float]], group_size: int) -> dict[str, float]:
    """Per learner batch of groups: `rollouts[i]` played for group i (dropped ones included:
    they were spent), `rewards[i]` the rewards the learner gets of it. `budget_spent` is the
    rollouts played over the fixed allocation's `group_size` per group; a group has nonzero
    variance when it has two rewards that differ."""
    if not rollouts:
        return {}
    return {
        "rollouts_per_prompt_mean": round(sum(rollouts) / len(rollouts), 6),
        "rollouts_per_prompt_max": max(rollouts),
        "nonzero_variance_fraction": round(sum(len(set(r)) > 1 for r in rewards) / len(rewards), 6),
        "budget_spent": round(sum(rollouts) / (group_size * len(rollouts)), 6),
    }


@dataclass
class _VigorBatch:
    """A batch under VIGOR: its allocator, its groups (in order) and their tasks, its pin."""

    allocator: VigorAllocator
    groups: list[int]
    tasks: dict[int, tuple[str, str]]
    version: int | None

    def state_dict(self) -> dict:
        return {
            "allocator": self.allocator.state_dict(),
            "groups": self.groups,
            "tasks": [[g, *self.tasks[g]] for g in self.groups],
            "version": self.version,
        }

    @classmethod
    def from_state(cls, state: dict) -> _VigorBatch:
        tasks = {g: (task_id, family) for g, task_id, family in state["tasks"]}
        return cls(VigorAllocator.from_state(state["allocator"]), list(state["groups"]), tasks, state["version"])


class TaskPicker:
    """Round robin over the tasks, or PAC's Thompson sampling over families (`pac`).
    `pick(batch)` returns (task id, family) for a group of 0-based batch `batch`; its state
    (RNG, counts and PAC posterior) is JSON-able.

    `phases` (a task stream, `tasks.streams`): (name, first batch, steps, task ids) in
    order; a batch's tasks are then its phase's only (the last phase's past the end), in
    turn within each phase, or PAC among the phase's families."""

    def __init__(self, tasks: list[tuple[str, str]], *, seed: int, pac=None, phases: list[tuple] | None = None) -> None:
        self.tasks = tasks  # (task id, family)
        self.family_of = dict(tasks)
        self.by_family: dict[str, list[str]] = {}
        for task_id, family in tasks:
            self.by_family.setdefault(family, []).append(task_id)
        self.phases = [(name, first, steps, list(ids)) for name, first, steps, ids in phases or ()]
        for name, _, _, ids in self.phases:
            if unknown := [task_id for task_id in ids if task_id not in self.family_of]:
                raise ValueError(f"phase {name!r} picks tasks that are not loaded: {unknown}")
        self.pac = pac
        self.rng = random.Random(seed)
        self.picked = 0
        self.picked_in: dict[str, int] = {}
        """Picks per phase name (round robin within a phase that returns goes on where it stopped)."""

    def phase(self, batch: int) -> tuple[str, int, int, list[str]] | None:
        """The phase (name, first batch, steps, task ids) of 0-based `batch`, or None without phases."""
        for phase in self.phases:
            if batch < phase[1] + phase[2]:
                return phase
        return self.phases[-1] if self.phases else None

    def pick(self, batch: int = 0) -> tuple[str, str]:
        phase = self.phase(batch)
        if phase is None:
            candidates, count = self.tasks, self.picked
        else:
            candidates = [(task_id, self.family_of[task_id]) for task_id in phase[3]]
            count = self.picked_in.get(phase[0], 0)
            self.picked_in[phase[0]] = count + 1
        if self.pac is None:
            choice = candidates[count % len(candidates)]
        else:
            families = None if phase is None else sorted({family for _, family in candidates})
            family = next(f for f, n in self.pac.allocate(1, self.rng, families).items() if n)
            members = [task_id for task_id, f in candidates if f == family]
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
            "picked_in": dict(self.picked_in),
            "rng": [version, list(internal), gauss],
            **({"pac": self.pac.state_dict()} if self.pac is not None else {}),
        }

    def load_state_dict(self, state: dict) -> None:
        self.picked = state["picked"]
        self.picked_in = dict(state.get("picked_in", {}))
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
        vigor: dict | None = None,
    ) -> None:
        """`vigor`: VIGOR's `m0`, `alpha`, `gamma`, `rounds` (`VigorAllocator`'s keywords) to
        allocate each batch's rollouts by reward variance; None: `group_size` per group."""
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
        self.vigor = dict(vigor) if vigor is not None else None
        if self.vigor is not None:  # refuse bad settings now, not at the first batch
            VigorAllocator(self.batch_trajectories, **self.vigor).first_round(range(groups_per_batch))
        self.next_group = 0
        self.issued: dict[int, int] = {}
        """Jobs created so far per batch still being created (its job ids are numbered from
        `batch * batch_trajectories`)."""
        self.vigor_batches: dict[int, _VigorBatch] = {}
        """Batches under VIGOR whose allocator is not done or whose groups are not released."""
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
        self.ready: list[tuple[int, list[Trajectory], int]] = []
        """Complete groups (id, trajectories, rollouts played), in the order they completed,
        not yet consumed."""
        self.consumed: list[list[str]] = []
        self.dropped: list[str] = []
        """Ids of trajectories dropped for staleness (infrastructure drops have no trajectory)."""
        self._waiting_since = -1
        self.counters = {"infra_retries": 0, "infra_dropped": 0, "stale_dropped": 0, "admission_waits": 0}
        self.lost_groups = 0
        """Streaming: groups created that will never reach a batch (every member dropped, for
        infrastructure or staleness). The `wait` admission bound counts only the others: else
        each loss shrank the window for good, an async run turned synchronous after
        `max_staleness` batches of stale drops, and infrastructure drops could stall it."""

    @property
    def batch_trajectories(self) -> int:
        return self.groups_per_batch * self.group_size

    # -- creating and dispatching jobs --------------------------------------------------------
    def _add_jobs(self, group: int, task: tuple[str, str], batch: int, version: int | None, count: int) -> None:
        """Queue `count` more rollouts of `group`, numbered on from the batch's last job id."""
        members = self.groups.setdefault(group, {})
        for _ in range(count):
            issued = self.issued.get(batch, 0)
            job_id = batch * self.batch_trajectories + issued
            self.issued[batch] = issued + 1
            if issued + 1 == self.batch_trajectories:  # the budget is spent: no more ids here
                del self.issued[batch]
            self.jobs[job_id] = EpisodeJob(
                job_id=job_id,
                group=group,
                task_id=task[0],
                family=task[1],
                seed=self.seed * 1_000_003 + job_id,
                batch=batch,
                version=version,
            )
            self.queue.append(job_id)
            members[job_id] = _PENDING

    def _create_group(self, batch: int, version: int | None) -> None:
        group = self.next_group
        self.next_group += 1
        self._add_jobs(group, self.picker.pick(batch), batch, version, self.group_size)

    def _create_vigor_batch(self, batch: int, version: int | None) -> None:
        """All `groups_per_batch` groups of `batch`, each with VIGOR's first round."""
        groups = list(range(self.next_group, self.next_group + self.groups_per_batch))
        self.next_group += self.groups_per_batch
        tasks = {group: self.picker.pick(batch) for group in groups}
        allocator = VigorAllocator(self.batch_trajectories, **self.vigor)
        self.vigor_batches[batch] = _VigorBatch(allocator, groups, tasks, version)
        for group, count in allocator.first_round(groups).items():
            self._add_jobs(group, tasks[group], batch, version, count)

    def _create_batch(self, batch: int, version: int | None) -> None:
        if self.vigor is not None:
            self._create_vigor_batch(batch, version)
            return
        for _ in range(self.groups_per_batch):
            self._create_group(batch, version)

    def _admit(self, version: int, free_slots: int) -> None:
        """Create the groups that `steps_done` allows; gated batches are pinned to `version`,
        the weights published after the learner's `steps_done`-th step."""
        if self.gated:
            # Batch b starts once b - max_staleness learner steps are done, on their weights.
            while self.next_group // self.groups_per_batch <= self.steps_done + self.max_staleness:
                self._create_batch(self.next_group // self.groups_per_batch, version)
            return
        while len(self.queue) < free_slots:
            if self.staleness_policy == "wait" and self.next_group - self.lost_groups >= (
                (self.steps_done + self.max_staleness + 1) * self.groups_per_batch
            ):
                if self._waiting_since != self.steps_done:  # count each hold once, not each poll
                    self._waiting_since = self.steps_done
                    self.counters["admission_waits"] += 1
                return
            if self.vigor is not None:  # a whole batch: its allocator ranks all its prompts
                self._create_vigor_batch(self.next_group // self.groups_per_batch, None)
            else:
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
            return self.fail(job.job_id, blame=not result.refused)
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
        `max_attempts`, drop it. `blame=False` (it ran beside a crashed job, or a sleeping
        worker refused it) does not count as an attempt."""
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
        if job.batch in self.vigor_batches:
            self._vigor_progress(job.batch)
        elif all(value is not _PENDING for value in members.values()):
            self._release(job.group)

    def _release(self, group: int) -> None:
        """A group is complete: its trajectories go to `ready`."""
        members = self.groups.pop(group)
        collected = [t for value in members.values() if value for t in value]
        if collected or self.gated:
            self.ready.append((group, collected, len(members)))
        else:
            self.lost_groups += 1

    def _vigor_progress(self, batch: int) -> None:
        """Once every rollout of a VIGOR batch created so far has finished: its next round's
        jobs, or (the allocator done) its groups, released in group order."""
        state = self.vigor_batches[batch]
        if any(value is _PENDING for group in state.groups for value in self.groups[group].values()):
            return
        while not state.allocator.done:
            rewards = {group: group_rewards(self.groups[group]) for group in state.groups}
            counts = state.allocator.next_round(rewards)
            for group, count in counts.items():
                self._add_jobs(group, state.tasks[group], batch, state.version, count)
            if counts:
                return
        del self.vigor_batches[batch]
        for group in state.groups:
            self._release(group)

    # -- learner batches ----------------------------------------------------------------------
    def _drop_stale(self, version: int) -> int:
        """Remove finished trajectories already over the staleness bound (they only get
        older); their ids are kept in `dropped`."""
        dropped, ready = 0, []
        for group, trajectories, played in self.ready:
            fresh = []
            for trajectory in trajectories:
                if staleness(trajectory, version) > self.max_staleness:
                    self.dropped.append(trajectory.trajectory_id)
                    dropped += 1
                else:
                    fresh.append(trajectory)
            if fresh or self.gated:
                ready.append((group, fresh, played))
            else:
                self.lost_groups += 1
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
        kept = [t for _, trajectories, _ in mine for t in trajectories]
        lags = [staleness(t, version) for t in kept]
        for trajectory, lag in zip(kept, lags, strict=True):
            trajectory.staleness = lag
        ids = [t.trajectory_id for t in kept]
        self.consumed.append(ids)
        self.taken += 1
        allocation = allocation_metrics(
            [played for _, _, played in mine], [[t.reward for t in ts] for _, ts, _ in mine], self.group_size
        )
        return Batch(self.taken, kept, ids, lags, dropped, allocation)

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
            "ready": [[g, [trajectory_to_dict(t) for t in ts], played] for g, ts, played in self.ready],
            "issued": [[b, n] for b, n in self.issued.items()],
            "vigor_batches": [[b, v.state_dict()] for b, v in self.vigor_batches.items()],
            "consumed": self.consumed,
            "dropped": self.dropped,
            "counters": self.counters,
            "lost_groups": self.lost_groups,
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
        # Checkpoints from before per-batch job counters: fixed groups of `group_size`.
        self.ready = [
            (entry[0], [trajectory_from_dict(t) for t in entry[1]], entry[2] if len(entry) > 2 else self.group_size)
            for entry in state["ready"]
        ]
        if "issued" in state:
            self.issued = {b: n for b, n in state["issued"]}
        else:
            created = self.next_group % self.groups_per_batch
            self.issued = {self.next_group // self.groups_per_batch: created * self.group_size} if created else {}
        self.vigor_batches = {b: _VigorBatch.from_state(v) for b, v in state.get("vigor_batches", [])}
        self.consumed = state["consumed"]
        self.dropped = state["dropped"]
        self.counters = dict(state["counters"])
        self.lost_groups = state.get("lost_groups", 0)  # checkpoints from before the count: none known
        self.picker.load_state_dict(state["picker"])


def group_rewards(members: dict[int, list[Trajectory] | None]) -> list[float]:
    """The rewards a group has so far (pending and dropped rollouts have none)."""
    return [t.reward for value in members.values() if isinstance(value, list) for t in value]


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
