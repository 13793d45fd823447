"""What the training experiments share: the methods and their settings, the runner that trains
warm starts and arms, reading a run's records, and the steps of every experiment's `main`.

The experiments (`learning`, `stability`, `online`, `se_rl`, `vigor`) import from here and
never from each other.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import RESULTS, report
from trainer.algorithms.registry import get_algorithm

if TYPE_CHECKING:
    from trainer.config import TrainConfig

logger = logging.getLogger(__name__)

METHODS: dict[str, list[str]] = {
    "sao": ["algorithm.name=sao"],  # critic baseline, length-adaptive GAE, double-sided mask
    "ppo": ["algorithm.name=ppo", "algorithm.gae_lambda=0.95"],  # critic, GAE(0.95), clipped objectives
    "grpo": ["algorithm.name=grpo"],  # group-normalised advantages, no critic, symmetric clip
    "grpo_mask": ["algorithm.name=grpo_mask"],  # GRPO's advantages with SAO's mask: the mask without the critic
    "dr_grpo": ["algorithm.name=dr_grpo"],  # no std normalisation, constant-horizon token sums
    "dapo": ["algorithm.name=dapo"],  # clip-higher, token mean, all-equal groups dropped
    # A control, not a method (issue #39): GRPO learning only from its positive advantages. SAO's
    # critic reads about 0 on this bench, so SAO pushes successes up and failures barely down;
    # this arm asks how far that alone goes without a critic.
    "grpo_pos": ["algorithm.name=grpo", "algorithm.positive_advantages_only=true"],
}


def algorithm_of(method: str) -> str:
    """The algorithm a method trains with (its `algorithm.name=` setting)."""
    return next(s.split("=", 1)[1] for s in METHODS[method] if s.startswith("algorithm.name="))


GROUPED = frozenset(m for m in METHODS if get_algorithm(algorithm_of(m)).objective == "group")
"""Methods that compare rollouts of a task (no critic): they play `--group-size` rollouts per task."""
GROUP_SIZE = 2
"""The group methods' rollouts per task by default (`--group-size`): 4 tasks x 2 rollouts at the
recipe's 8 episodes per step, the most tasks per step a group method can see."""
COMMON = ["algorithm.loss_aggregation=null"]
"""For every run: each method's own aggregation (the config pins SAO's token mean)."""


def method_settings(method: str, episodes: int, group_size: int = GROUP_SIZE) -> list[str]:
    """One method's overrides at `episodes` episodes per step: its algorithm, groups of
    `group_size` rollouts of `episodes // group_size` tasks for the group methods (no critic),
    one rollout of `episodes` tasks otherwise, each with its own paper's loss aggregation."""
    group = group_size if method in GROUPED else 1
    return [*METHODS[method], f"algorithm.group_size={group}", f"orchestrator.episodes_per_step={episodes // group}",
            *COMMON]  # fmt: skip


# -- a run's records ----------------------------------------------------------------------------


def read_records(run_dir: Path) -> list[dict]:
    """A run's metrics.jsonl lines ([] before it wrote any)."""
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def read_summary(run_dir: Path) -> dict:
    """A run's summary.json ({} before it finished)."""
    path = run_dir / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def finished(run_dir: Path, steps: int) -> bool:
    """A run is done when its final checkpoint is complete and its metrics reach `steps`."""
    done = (run_dir / "checkpoints" / f"step_{steps:06d}" / "state.json").is_file()
    return done and (steps == 0 or any(r.get("step") == steps for r in read_records(run_dir)))


def thirds(values: list[float]) -> tuple[float, float]:
    """Means of the first and the last third of `values` (at least one value each)."""
    third = max(1, len(values) // 3)
    return statistics.fmean(values[:third]), statistics.fmean(values[-third:])


def moving_average(values: list[float], window: int) -> list[float]:
    """The trailing mean at each position, over the last `window` values (fewer at the start)."""
    return [statistics.fmean(values[max(0, i + 1 - window) : i + 1]) for i in range(len(values))]


def spread(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """Mean and population std (4 decimals) of the `values` that are not None; (None, None) if none is."""
    found = [v for v in values if v is not None]
    return (round(statistics.fmean(found), 4), round(statistics.pstdev(found), 4)) if found else (None, None)


def spreads(runs: Iterable[dict], keys: Iterable[str]) -> dict:
    """`KEY_mean` and `KEY_std` (`spread` over `runs`, one figures dict per seed) of each of `keys`."""
    runs = list(runs)
    row = {}
    for key in keys:
        row[f"{key}_mean"], row[f"{key}_std"] = spread(r.get(key) for r in runs)
    return row


def spread_cell(row: dict, key: str, fmt: str = ".3f") -> str:
    """A table cell: `row`'s KEY_mean ± KEY_std, or "—" without a mean."""
    mean, std = row[f"{key}_mean"], row[f"{key}_std"]
    return "—" if mean is None else f"{mean:{fmt}} ± {std:{fmt}}"


def flat_spreads(rows: Iterable[dict], keys: Iterable[str]) -> dict:
    """The `--json` figures of arm rows: `ARM_KEY_mean` and `ARM_KEY_std` for each of `keys`."""
    keys = list(keys)
    return {
        f"{row['arm']}_{key}_{stat}": row[f"{key}_{stat}"] for row in rows for key in keys for stat in ("mean", "std")
    }


def save_figure(fig: Any, axes: list, path: Path, legend: str = "best") -> Path:
    """Finish a matplotlib figure of `axes` (a grid, a legend at `legend` where an axis has data)
    and write it to `path`."""
    import matplotlib.pyplot as plt

    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize=8, loc=legend)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- training ------------------------------------------------------------------------------------


class TrainingRunner:
    """Runs the recipe in this process (`trainer.train.train`, on the Ray that `run_experiment`
    starts): one warm start per seed in `out/runs/warm-s<seed>` (reused while its checkpoint
    is complete), then each arm from that warm start (`arm`)."""

    def __init__(
        self, config: str, overrides: list[str], out: Path, steps: int | None, group_size: int = GROUP_SIZE
    ) -> None:
        from trainer.resolve import load_config

        self.config, self.overrides, self.runs, self.group_size = config, overrides, out / "runs", group_size
        self.steps = [f"run.steps={steps}"] if steps is not None else []
        self.base = load_config(config, [*overrides, *self.steps])
        if not self.base.warm_start.steps:
            raise SystemExit(f"{config}: the experiments compare methods after a warm start; set warm_start.steps")
        if group_size < 2 or self.base.orchestrator.episodes_per_step % group_size:
            raise SystemExit(f"{config}: orchestrator.episodes_per_step must be a multiple of the group size "
                             f"{group_size}, which must be at least 2 (the group methods play groups of that size "
                             "at the same episode budget)")  # fmt: skip

    def _train(self, name: str, settings: list[str]) -> Path:
        """A fresh run `runs/<name>` (`settings` on top of the overrides): an unfinished one starts again."""
        from trainer.resolve import load_config
        from trainer.train import train

        shutil.rmtree(self.runs / name, ignore_errors=True)
        return train(load_config(self.config, [*self.overrides, f"run.output_dir={self.runs}", f"run.name={name}",
                                               *settings]))  # fmt: skip

    def warm_start(self, seed: int) -> Path:
        """The seed's warm-started policy (trained once, reused by every method and lr)."""
        name = f"warm-s{seed}"
        checkpoint = self.runs / name / "checkpoints" / "step_000000"
        if not (checkpoint / "state.json").is_file():
            self._train(name, [f"run.seed={seed}", "run.steps=0", "evaluation.episodes=0",
                               "warm_start.critic_pretrain_steps=0"])  # fmt: skip
        return checkpoint / "policy"

    def arm(self, name: str, seed: int, steps: int, settings: list[str], policy: Path) -> Path:
        """Run `name` (`settings` on top of the overrides) for `steps` RL steps from `policy`
        (the seed's `warm_start`), in `runs/<name>-s<seed>`: kept when finished, resumed from
        its newest checkpoint when not."""
        from trainer.checkpoints import latest_checkpoint
        from trainer.resolve import load_config
        from trainer.train import train

        folder = self.runs / f"{name}-s{seed}"
        if finished(folder, steps):
            logger.info("%s seed %d: kept from %s", name, seed, folder)
            return folder
        if latest_checkpoint(folder) is None:  # a fresh start appends: drop an earlier attempt's lines
            (folder / "metrics.jsonl").unlink(missing_ok=True)
        config = load_config(
            self.config,
            [*self.overrides, f"run.output_dir={folder.parent}", f"run.name={folder.name}", f"run.seed={seed}",
             f"run.steps={steps}", "run.resume=auto", f"model.name={policy}", "warm_start.steps=0", *settings],
        )  # fmt: skip
        started = time.monotonic()
        train(config)
        logger.info("%s seed %d: %d steps in %.0f s (%s)", name, seed, steps, time.monotonic() - started, folder)
        return folder

    def timed_warm_start(self, seed: int) -> Path:
        """`warm_start`, logged with how long it took (0 s when kept)."""
        started = time.monotonic()
        policy = self.warm_start(seed)
        logger.info("seed %d: warm start %s (%.0f s)", seed, policy.parent.parent.parent, time.monotonic() - started)
        return policy

    def arms(
        self, seeds: int, settings: dict[str, list[str]], done: Callable[[str, int, Path], None] | None = None
    ) -> dict[str, dict[int, Path]]:
        """Per seed 0..`seeds`-1 its warm start, then each arm (name -> its settings) from it
        (`arm`, for the config's `run.steps`), `done(name, seed, folder)` after each; returns
        arm -> seed -> the run's folder."""
        folders: dict[str, dict[int, Path]] = {name: {} for name in settings}
        for seed in range(seeds):
            policy = self.timed_warm_start(seed)
            for name, arm_settings in settings.items():
                folders[name][seed] = self.arm(name, seed, self.base.run.steps, arm_settings, policy)
                if done is not None:
                    done(name, seed, folders[name][seed])
        return folders


# -- an experiment's command line ----------------------------------------------------------------


def experiment_parser(
    name: str, description: str, example: str, *, config: str, out: Path, out_help: str
) -> argparse.ArgumentParser:
    """The parser of `python -m bench.experiments.NAME` with the options every experiment has:
    `--config` (the recipe, default `config`), `--out` (its runs, default `out`), `--json` (the
    figures, default `bench/results/NAME.json`) and the `section.field=value` overrides.
    `description` is what `--help` says it measures, `example` a command line."""
    parser = argparse.ArgumentParser(
        prog=f"python -m bench.experiments.{name}", description=description, epilog=f"example: {example}"
    )
    parser.add_argument("--config", default=config, help="the training recipe every run starts from")
    parser.add_argument("--out", type=Path, default=out, help=out_help)
    parser.add_argument("--json", type=Path, default=RESULTS / f"{name}.json", help="where to write the figures")
    parser.add_argument(
        "overrides", nargs="*", help="section.field=value settings for every run (e.g. evaluation.episodes=16)"
    )
    return parser


def keep_one_setting(name: str, out: Path, setting: dict) -> None:
    """A resumable bench's `out` holds runs of one setting: exit naming the one it holds when
    `setting` differs, else record it (a first run) and go on."""
    recorded = out / "setting.json"
    if recorded.is_file() and json.loads(recorded.read_text()) != setting:
        raise SystemExit(f"{name}: {out} holds runs made with {recorded.read_text().strip()}; use another --out")
    out.mkdir(parents=True, exist_ok=True)
    recorded.write_text(json.dumps(setting) + "\n")


def kept_runs(out: Path) -> str:
    """The line an interrupted arms bench ends with: the runs in `out/runs` and how to go on."""
    runs = sorted(p.name for p in (out / "runs").glob("*-s*")) if (out / "runs").is_dir() else []
    return (
        f"runs so far ({', '.join(runs) or 'none'}; unfinished ones resume from their newest checkpoint) "
        f"kept in {out}; run the same command again to continue"
    )


def on_ray(prog: str, workers: int, work: Callable[[], object], kept: Callable[[BaseException], str]) -> object:
    """`work()` on a local Ray started for `workers` actors (shut down after), Ctrl-C and
    SIGTERM handled: returns what `work` returned, or exits with the interrupt's status after
    the one line saying what `kept(exc)` kept; a config or task error is one line naming `prog`."""
    import ray

    from sandboxes.console import interrupted, interrupts
    from tasks import TaskError
    from trainer.config import ConfigError
    from trainer.orchestrator.loop import start_ray

    with interrupts():
        started = False
        try:
            started = start_ray(workers=workers)
            return work()
        except KeyboardInterrupt as exc:
            sys.exit(interrupted(exc, kept(exc)))
        except (ConfigError, TaskError) as exc:
            sys.exit(f"{prog}: {exc}")
        finally:
            if started:
                ray.shutdown()


def run_experiment(
    name: str,
    args: argparse.Namespace,
    overrides: list[str],
    check: Callable[[TrainConfig], None],
    work: Callable[[], object],
    write: Callable[[Any, TrainConfig], dict],
    kept: Callable[[BaseException], str],
) -> int:
    """What an experiment's `main` does after parsing `args`: load `args.config` with
    `overrides` (a bad one: one line naming the bench), `check(config)` (which may exit: an
    `--out` of another setting), `work()` on Ray (`on_ray`, `kept` saying what an interrupt
    kept), then the table of `write(what work returned, config)` and its JSON at `args.json`."""
    from sandboxes.console import setup_logging
    from trainer.config import ConfigError
    from trainer.resolve import load_config

    setup_logging()
    prog = f"bench.experiments.{name}"
    try:
        base = load_config(args.config, overrides)
    except ConfigError as exc:
        sys.exit(f"{prog}: {exc}")
    check(base)
    workers = base.orchestrator.rollout_workers + base.placement.learner_ranks
    result = on_ray(prog, workers, work, kept)
    report(name, write(result, base), args.json)
    return 0
