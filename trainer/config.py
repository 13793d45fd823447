"""Typed configuration of `make train-swe`: a YAML file under `configs/` plus `a.b=value`
overrides from the command line, one sub-model per component.

    run            where the run is written, its seed, how many steps, checkpoints, resume
    model          which model, served by which inference engine
    tasks          which tasks, in which sandboxes, picked by which curriculum
    rollout        how an episode is played: turn and token limits, temperature, PATR trees
    algorithm      the update rule and its hyper-parameters (SAO by default)
    learner        optimisation: learning rates, clipping, precision, memory, guards
    warm_start     supervised start on gold trajectories, critic pre-training
    orchestrator   async or sync, staleness, batches, workers, fault handling
    placement      learner ranks, GPUs, the Ray cluster
    evaluation     success on fixed seeds before and after RL

This module is the schema. `trainer.resolve.load_config` reads a file and overrides into
it, checks the rules between sections and settles every derived value: the config that
runs. Each component takes only its part (`trainer.build` hands them out). Errors name the
file (or the override) and the dotted field, in the one format `sandboxes.yaml_files` gives
every user-written YAML file.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from agent_env.limits import limit_field
from sandboxes.yaml_files import ConfigError  # noqa: F401  (re-exported: the error a bad config raises)
from sandboxes.yaml_files import leaf_fields as _leaf_fields
from trainer.algorithms.registry import ALGORITHMS


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, protected_namespaces=())


class RunConfig(_Section):
    name: str = "train-swe"
    """Folder under `output_dir` for metrics and checkpoints."""
    output_dir: str = "runs"
    """Where runs are written."""
    seed: int = 0
    """Seeds weights (for random init), sampling and task order."""
    steps: int = Field(default=4, ge=0)
    """Learner steps to run (0: only the warm start and critic pre-training, then a
    checkpoint `step_000000` to start other runs from)."""
    checkpoint_every: int = Field(default=0, ge=0)
    """Save a checkpoint every N steps (0: only at the end)."""
    resume: str | None = None
    """Checkpoint folder to resume from, or `auto`: the newest complete checkpoint of this
    run (a fresh start when there is none)."""
    samples_every: int = Field(default=1, ge=0)
    """Every N steps, write a few of the step's trajectories, decoded, to `samples.jsonl`
    (`python -m evals.view RUN` shows them as a page); 0: none."""
    tracker: Literal["none", "wandb", "mlflow"] = "none"
    """Also send the metrics (and the config, once) to an experiment tracker: `wandb`
    (offline under `<run>/wandb/` unless `WANDB_MODE` is set; upload with `wandb sync`) or
    `mlflow` (a file store at `<run>/mlruns` unless `MLFLOW_TRACKING_URI` is set). Needs the
    `tracking` extra: `pip install -e '.[tracking]'`."""
    tracker_project: str = "agentic-rl"
    """The wandb project or MLflow experiment that `tracker` logs the run (as `name`) to."""


class ModelConfig(_Section):
    name: str = "tiny"
    """Hugging Face model name or folder; `tiny` is the shipped randomly initialised model."""
    engine: Literal["hf", "vllm"] = "hf"
    """Inference backend for rollouts: `hf` (transformers, CPU) or `vllm` (GPU)."""


class TasksConfig(_Section):
    source: str | list[str] = "builtin"
    """Where tasks come from: `builtin`, a folder of task YAMLs, a SWE-bench JSONL or dataset
    name, or a list of them loaded together (`[builtin, my-tasks]`). `ids` applies to all of
    them: with another source, pass `tasks.ids=[]` or that source's own ids.
    `stream:online` (or `stream:PATH`): a task stream, SAO's online setting: phases of
    learner steps, each picking its own tasks, some of them variants whose repository or
    hidden tests changed (`tasks/streams.py`); `ids` does not apply, and `phase` is in the
    metrics."""
    ids: list[str] = Field(default_factory=list)
    """Only these task ids (all when empty)."""
    repo_cache: str | None = None
    """Folder of git clones (`owner__name` or `owner/name`) that SWE-bench rows' workspaces
    are made from; their environments are then built with pip for `sandbox_backend`
    (`tasks/README.md`). Rows that cannot be had this way are left out with the reason."""
    sandbox_backend: Literal["local", "docker"] = "local"
    """Where episodes run: `local` (bubblewrap) or `docker`."""
    curriculum: Literal["round_robin", "pac"] = "round_robin"
    """How tasks are picked each step: in turn, or PAC's Thompson sampling over task families
    (learnability and reward progress; its state is saved in checkpoints)."""


class TreeConfig(_Section):
    branches: int = Field(default=4, gt=0)
    """Most branches per tree (a hard limit)."""
    children: int = Field(default=2, ge=2)
    """Branches a promising branch splits into."""
    expand_every: int = Field(default=2, gt=0)
    """Turns between scoring rounds."""
    scorer: Literal["value", "heuristic", "judge"] = "value"
    """Who rates branches: the critic (`value`), rules over what the agent saw
    (`heuristic`), or the policy's own engine as an LLM judge (`judge`)."""


class RolloutConfig(_Section):
    kind: Literal["linear", "tree"] = "linear"
    """`linear` episodes, or PATR `tree` rollouts that fork promising branches (one tree per
    picked task and group member; its branches form one group)."""
    # The agent's limits: meaning, bounds and docstrings in `agent_env.limits`, shared with evals.
    max_turns: int = limit_field("max_turns", 3)
    max_new_tokens: int = limit_field("max_new_tokens", 48)
    max_total_tokens: int = limit_field("max_total_tokens", 2048)
    max_observation_chars: int = Field(default=2000, gt=0)
    """Tool output kept per observation (head and tail)."""
    max_format_errors: int | None = Field(default=None, gt=0)
    """End an episode (graded as it stands, `end: format_errors`) after this many replies in a
    row with no well-formed tool call; None: the agent may retry until its turns run out. A
    small model that slips once writes garbage for every turn after, and RL pushing down
    those garbage tokens is a large, directionless gradient: the CPU demo sets 1."""
    format_error_reward: float | None = None
    """The most an episode that `max_format_errors` ended earns in training, whatever its
    grade (None: its grade). Graded as it stands, an episode that lands the edit and then writes
    garbage instead of `finish` earns as much as one that finishes cleanly, and RL then
    reinforces the garbage: in a measured multi-turn run 42 of 61 resolved episodes ended
    that way, and sampled entropy and format errors rose step by step. The multi-turn
    recipe sets 0. `resolved` (and every success rate and evaluation) still reports the grade."""
    prefix_cache: bool = True
    """The hf engine keeps each episode's KV cache between its turns, so a turn decodes only
    its new tokens. Resolved off in runs that must be bitwise reproducible
    (`orchestrator.deterministic`, sync mode: `trainer.resolve`)."""
    batch_turns: bool = True
    """A worker batches the turns its concurrent episodes ask for while its engine is busy
    (the hf engine: one decode for all, each from its cached prefix with its own seed;
    `python -m bench.perf.rollout`). Resolved on only with `prefix_cache` and the hf engine."""
    temperature: float = Field(default=1.0, gt=0)
    """Sampling temperature; the learner scores tokens at the same temperature."""
    tree: TreeConfig = Field(default_factory=TreeConfig)
    """PATR trees (`kind: tree`)."""
    sandbox_pool: int = Field(default=0, ge=0)
    """Warm pool: sandboxes each rollout worker keeps started ahead, per task (its image and
    workspace), refilled in the background, so that an episode (and its grading) takes a
    ready one instead of waiting for a start (`sandboxes.pool`; `python -m bench.perf.pool`
    measures the effect). Each is used once, never reused; all are closed at shutdown.
    0: off, every sandbox starts when asked for (a cold start)."""
    sandbox_pool_tasks: int = Field(default=8, gt=0)
    """With `sandbox_pool`: the most tasks a worker keeps warm at once (those it ran most
    recently; a task pushed out has its idle sandboxes closed). A task asks for two specs,
    its agent's sandbox and grading's (`agent_env.grading.runs.grading_spec_for`), so the
    idle sandboxes are at most `2 * sandbox_pool * sandbox_pool_tasks` per worker."""
    grading_memo: bool = True
    """Each rollout worker keeps the verdicts of the (task, diff) pairs it graded and gives
    later episodes that end with the same diff the kept verdict, without a sandbox
    (`agent_env.grading.memo`: a paying verdict is kept once two gradings agree, a diff graded
    both ways never): most episodes of a run end with a diff seen before (the empty one, the
    learned fix). Off: every episode's diff is graded anew."""


class SAPOConfig(_Section):
    tau_v: float = Field(default=1.0, gt=0)
    """Temperature of the value readout `V = r_max * clip((z_w+ - z_w-) / tau_v, -1, 1)`;
    large enough that the logit gap stays inside the band (the clip has no gradient outside)."""
    r_max: float = Field(default=1.0, gt=0)
    """Largest |value| the readout can express; at least the largest |return|."""
    c_v: float = Field(default=0.5, ge=0)
    """Weight of the value loss (V before each turn toward its lambda-return)."""
    c_q: float = Field(default=0.5, ge=0)
    """Weight of the Q loss (Q after each turn toward `r + gamma V_next`)."""
    beta: float = Field(default=0.001, ge=0)
    """Weight of the k3 KL to the rollout policy (the engine's logprobs; no frozen copy)."""
    c_h: float = Field(default=0.0, ge=0)
    """Weight of the entropy bonus (0: off, no entropy is computed)."""


class VigorConfig(_Section):
    m0: int = Field(default=2, ge=2)
    """Rollouts every prompt of a batch gets in round 1 (two at least: a variance needs two)."""
    alpha: float = Field(default=0.5, gt=0, le=1)
    """Share of the prompts still in play kept each later round (highest reward variance first)."""
    gamma: float = Field(default=2.0, gt=0)
    """Growth of the rollouts per kept prompt from one round to the next."""
    rounds: int = Field(default=4, ge=1)
    """Rounds in all (T); the last spends what is left of the batch's budget."""


class FamilyWeightsConfig(_Section):
    mode: Literal["learnability", "failure"] = "learnability"
    """A family's need: `learnability`, the mean |advantage| of its recent trajectories (how
    much the loss still has to say about it), or `failure`, 1 - its mean reward."""
    smoothing: float = Field(default=0.9, ge=0, lt=1)
    """Exponential moving average of each family's need: the weight of the old value."""
    floor: float = Field(default=0.1, ge=0, le=1)
    """The least weight a family keeps, however little it needs."""


class AlgorithmConfig(_Section):
    name: Literal[tuple(ALGORITHMS)] = "sao"  # type: ignore[valid-type]
    """Update rule (`trainer.algorithms.registry`): SAO (default), PPO with a critic, AReaL's
    decoupled PPO, the critic-free group methods GRPO, Dr.GRPO and DAPO, `grpo_mask` (GRPO's
    advantages with SAO's double-sided mask: an ablation of the mask alone), or SAPO (one model
    for policy and value, read through two reserved vocabulary tokens)."""
    group_size: int = Field(default=1, gt=0)
    """Rollouts per task per step. SAO: 1 (a single rollout per prompt); group methods need >= 2."""
    eps_low: float = Field(default=0.8, gt=0, le=1)
    """SAO mask: tokens with ratio <= 1 - eps_low are dropped (coding: 0.8)."""
    eps_high: float = Field(default=3.0, gt=0)
    """SAO mask: tokens with ratio >= 1 + eps_high are dropped (coding: 3.0)."""
    clip_low: float | None = Field(default=None, gt=0)
    """PPO-family lower clip (unset: resolved to the algorithm's own, 0.2)."""
    clip_high: float | None = Field(default=None, gt=0)
    """PPO-family upper clip (unset: resolved to the algorithm's own; DAPO 0.28)."""
    loss_aggregation: Literal["token_mean", "sequence_mean", "sequence_sum_norm"] | None = None
    """How token losses are averaged over the batch (unset: resolved to the algorithm's own)."""
    gamma: float = Field(default=1.0, gt=0, le=1)
    """Discount per policy token (SAPO: per turn)."""
    gae_lambda: float | None = Field(default=None, ge=0, le=1)
    """Fixed policy GAE lambda (`bench.experiments` runs PPO at 0.95; unset under SAPO:
    resolved to 0.95); None uses SAO's length-adaptive lambda."""
    lambda_alpha: float = Field(default=1.5, gt=0)
    """Length-adaptive GAE for the policy: lambda = 1 - 1/(alpha * length)."""
    critic_lambda: float = Field(default=1.0, ge=0, le=1)
    """GAE lambda of the critic's returns (SAO: 1, Monte Carlo returns)."""
    critic_steps: int = Field(default=2, ge=0)
    """Critic updates per policy update (SAO: 2)."""
    sapo: SAPOConfig = Field(default_factory=SAPOConfig)
    """SAPO's shared policy-value model (`name: sapo`)."""
    allocation: Literal["fixed", "vigor"] = "fixed"
    """Rollouts per prompt in a batch (group methods): `fixed` gives each `group_size`;
    `vigor` (VIGOR, arXiv 2607.22002) spends the same budget, `episodes_per_step *
    group_size` rollouts per batch, in rounds that go to the prompts with the highest reward
    variance so far (`trainer.algorithms.vigor`); linear rollouts only."""
    vigor: VigorConfig = Field(default_factory=VigorConfig)
    """VIGOR's rounds (`allocation: vigor`); the defaults are the paper's."""
    family_weights: Literal["none", "se_rl"] = "none"
    """Loss weight per task family: `none` (every trajectory counts alike), or `se_rl`
    (SE-RL's hybrid-environment rebalancing, our rule since the paper's is not public:
    `trainer.algorithms.curriculum.FamilyLossWeights`): each family's advantages are scaled
    by `floor + (1 - floor) * need / mean need` (weights average 1 over families), its need an
    average of what the last steps measured; logged per step (`family_weight/<family>`), kept
    in checkpoints."""
    se_rl: FamilyWeightsConfig = Field(default_factory=FamilyWeightsConfig)
    """The rebalancing rule's settings (`family_weights: se_rl`)."""
    positive_advantages_only: bool = False
    """A control, not a method: zero every negative advantage before the loss, so the policy
    learns only from what beat its baseline (`bench.experiments.learning`'s `grpo_pos`
    arm, issue #39: how much of a method's result comes from pushing failures down)."""


class LearnerConfig(_Section):
    lr: float = Field(default=1e-6, gt=0)
    """Policy learning rate (AdamW)."""
    critic_lr: float = Field(default=5e-6, gt=0)
    """Critic learning rate (SAO: 5e-6)."""
    max_grad_norm: float = Field(default=1.0, gt=0)
    """Gradient norm clip, per model and step."""
    freeze_critic_attention: bool = False
    """Freeze the critic's attention layers during RL (an option SAO reports)."""
    bf16: bool = False
    """bfloat16 parameters and compute under FSDP2 (GPU learners; float32 on CPU)."""
    activation_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, about a third more compute."""
    token_budget: int = Field(default=16384, gt=0)
    """Padded tokens per micro-batch (longest x count); gradients accumulate over them. With
    `tree_packing`, packed tokens per micro-batch (each distinct prefix counted once)."""
    tree_packing: bool = False
    """Tree training: compute each shared prefix of a micro-batch once (PATR's trees, and the
    prompt every episode of a task shares), packing its sequences into one row with an
    ancestor attention mask (`trainer.learner.tree`); the losses are the flat ones (to 1e-5).
    Fewer tokens through the model, but a dense [packed x packed] attention mask: a gain when
    sequences share long prefixes (`python -m bench.perf.tree`: PATR trees 1.8x faster per step
    on the tiny model, independent episodes 0.94x). Unless set, resolved on exactly when
    `rollout.kind` is `tree`."""
    max_bad_steps: int = Field(default=3, gt=0)
    """Steps in a row with a non-finite loss or gradient norm before training stops (each
    such step is skipped and counted)."""


class WarmStartConfig(_Section):
    steps: int = Field(default=0, ge=0)
    """Supervised steps on gold trajectories (each task's gold patch applied through the agent's
    own tools) before RL; a randomly initialised model solves nothing without them."""
    lr: float = Field(default=3e-3, gt=0)
    """Learning rate of the warm start (its own AdamW)."""
    style: Literal["auto", "edit", "patch", "explore"] = "patch"
    """How gold trajectories make their change: `explore` as a multi-turn agent (search for
    the definition, view it, edit, run the repository's tests, finish: one tool call per
    turn), `edit` in one turn of `str_replace_editor` calls (a quarter of the tokens of a
    patch for a one-line fix), `patch` as `git apply` of the gold patch, `auto` as edits
    where the patch allows it."""
    critic_pretrain_steps: int = Field(default=0, ge=0)
    """Critic-only updates on one batch of episodes before RL starts (SAO's value pre-training)."""


class OrchestratorConfig(_Section):
    mode: Literal["async", "sync"] = "async"
    """`async`: episodes stream to the learner as they finish and keep going across weight
    updates; `sync`: the baseline that generates a whole batch, then trains on it."""
    episodes_per_step: int = Field(default=3, gt=0)
    """Groups (tasks) per learner step; each has `algorithm.group_size` rollouts (SAO: one)."""
    max_staleness: int = Field(default=1, ge=0)
    """Async: the most policy versions a consumed trajectory's oldest token may lag behind
    the learner; older ones are dropped and counted. Resolved to 0 under `mode: sync` and
    `multiplex: colocated`."""
    staleness_policy: Literal["wait", "drop"] = "wait"
    """Async: `wait` holds new episodes back while they could exceed `max_staleness`
    (counted as admission waits); `drop` never holds generation back and only drops."""
    deterministic: bool = False
    """Async, bitwise reproducible: batch b is fixed, generated with the weights of step
    b - max_staleness and consumed whole (overlap without timing-dependent results)."""
    rollout_workers: int = Field(default=2, gt=0)
    """Ray actors that play episodes, each with its own inference engine."""
    episodes_per_worker: int = Field(default=2, gt=0)
    """Episodes one worker plays at once (they share its engine, one turn at a time)."""
    batch_tokens: int = Field(default=0, ge=0)
    """Async: also step when the finished trajectories hold this many tokens (0: off)."""
    episode_timeout_s: float = Field(default=900.0, gt=0)
    """An episode running longer is taken as a hung worker: the worker is restarted and
    the episode retried."""
    max_attempts: int = Field(default=3, gt=0)
    """Tries per episode before an infrastructure failure drops it (counted)."""
    multiplex: Literal["static", "bidirectional", "colocated"] = "static"
    """How resource units are shared between rollout and training (BiDiRL, docs/multiplex.md).
    A unit is one rollout worker or one learner rank: there are `rollout_workers +
    placement.learner_ranks` of them. `static`: the fixed split, as configured. `bidirectional`:
    after `multiplex_profile_steps` steps the planner moves to the split its fitted time model
    predicts fastest, then a unit of the waiting pool is lent to the bottleneck stage (a worker
    sleeps and the learner grows a rank, or the learner shrinks and the worker wakes with the
    newest weights) and returned when the imbalance reverses. `colocated`: every unit
    time-shares: all generate one batch, then all train on it (synchronous: max_staleness 0).
    Async mode only; `multiplex.json` in the run folder holds the profile, model and switches."""
    multiplex_profile_steps: int = Field(default=3, ge=0)
    """Bidirectional: learner steps profiled on the configured split before the planner fits
    the time model and moves to its split (0: keep the configured split, no planning)."""
    multiplex_window_s: float = Field(default=30.0, gt=0)
    """Bidirectional: seconds of the window the wait signals are measured over (restarted at
    every switch; it also spans at least `multiplex_window_steps` learner steps)."""
    multiplex_window_steps: int = Field(default=4, gt=0)
    """Bidirectional: learner steps a window must cover before the rule may move a unit."""
    multiplex_min_imbalance: float = Field(default=0.2, gt=0, le=1)
    """Bidirectional: a pool lends only when its wait signal (the share of the window the
    learner waited for a batch, or rollout slots were held back by the learner) is at least this."""


class PlacementConfig(_Section):
    learner_ranks: int = Field(default=1, gt=0)
    """Ray actors forming the FSDP2 learner (gloo on CPU, NCCL with one GPU each)."""
    learner_gpus: float = Field(default=0.0, ge=0)
    """GPUs per learner rank (0 on CPU machines)."""
    worker_gpus: float = Field(default=0.0, ge=0)
    """GPUs per rollout worker (vllm engines; a fraction shares one GPU)."""
    ray_address: str | None = None
    """Ray cluster to join (`auto`, or host:port); None starts a local one."""


class EvaluationConfig(_Section):
    episodes: int = Field(default=0, ge=0)
    """Episodes played (the tasks in turn, fixed seeds) with the weights RL starts from and
    again with the final weights; their success rates go to `summary.json`. The same seeds
    both times (common random numbers), so the difference is the policy's, not the dice's."""


class TrainConfig(_Section):
    run: RunConfig = Field(default_factory=RunConfig)
    """The run: its folder, seed, length, checkpoints and resume."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The model and the engine that serves it to the rollouts."""
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    """The tasks, their sandboxes and the curriculum."""
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    """How episodes are played."""
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    """The update rule."""
    learner: LearnerConfig = Field(default_factory=LearnerConfig)
    """Optimisation."""
    warm_start: WarmStartConfig = Field(default_factory=WarmStartConfig)
    """Supervised warm start and critic pre-training."""
    orchestrator: OrchestratorConfig = Field(default_factory=OrchestratorConfig)
    """Async scheduling and fault handling."""
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    """Devices and the Ray cluster."""
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    """Evaluation before and after RL."""

    _resolved_as: str | None = PrivateAttr(default=None)
    """The config as `trainer.resolve.resolve` returned it (JSON), so a later change shows."""

    def mark_resolved(self) -> TrainConfig:
        """Record this config as resolved (only `trainer.resolve.resolve` calls this)."""
        self._resolved_as = self.model_dump_json()
        return self

    @property
    def resolved(self) -> bool:
        """Whether this is a resolved config, unchanged since: what the recipe runs."""
        return self._resolved_as is not None and self._resolved_as == self.model_dump_json()


def leaf_fields(model: type[BaseModel] = TrainConfig, prefix: str = ""):
    """(dotted name, field) of every leaf field, in declaration order."""
    return _leaf_fields(model, prefix)
