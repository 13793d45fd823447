"""`make train-swe`: RL on software-engineering tasks, end to end, on Ray (SAO by default).

    python -m trainer.train [CONFIG.yaml] [section.field=value ...]

Reads the typed config (`trainer.config`), then runs the asynchronous RL recipe
(`trainer.recipes.rl`): set up tasks, Ray, the learner and rollout workers; warm-start on
gold trajectories; evaluate; train with RL while episodes stream to the learner; evaluate
again. Writes `runs/<run.name>/`: metrics.jsonl, metrics.png, tensorboard/, summary.json and
checkpoints/.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tasks import TaskError
from trainer.config import ConfigError, TrainConfig, leaf_fields
from trainer.inference.manifest import ManifestError
from trainer.orchestrator.loop import RayStartError
from trainer.resolve import DERIVED, load_config


def train(config: TrainConfig, *, sandbox_factory=None) -> Path:
    """Run training; returns the run folder (metrics.jsonl, metrics.png, checkpoints/).
    `sandbox_factory` replaces the configured backend's (tests inject failing sandboxes)."""
    from trainer.recipes.rl import RLRecipe

    with RLRecipe(config, sandbox_factory=sandbox_factory) as recipe:
        try:
            recipe.setup()
            recipe.warm_start()
            recipe.evaluate("eval_before")
            recipe.run()
            recipe.evaluate("eval_after")
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM under `interrupts()`
            exc.kept = recipe.keep_progress()  # what the one line at exit says
            raise
    return recipe.run_dir


def usage() -> str:
    """`--help`: what the command does, an example, and every config field with its default."""
    lines = [
        "usage: python -m trainer.train [CONFIG.yaml] [section.field=value ...]",
        "",
        __doc__.strip().splitlines()[0],
        "",
        "example: python -m trainer.train configs/train_swe.yaml run.steps=20 learner.lr=3e-4",
        "",
        "fields (default, meaning; [derived: ...] marks a value trainer.resolve settles from others,",
        "and the run's config.yaml records the settled value):",
    ]
    for name, field in leaf_fields():
        meaning = " ".join((field.description or "").split())
        derived = f" [derived: {DERIVED[name]}]" if name in DERIVED else ""
        lines.append(f"  {name}={field.get_default(call_default_factory=True)!r}  {meaning}{derived}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Ctrl-C or SIGTERM stops training within seconds: the metrics written and a checkpoint
    of the last completed step are kept, Ray and the sandboxes are shut down, and one line
    says how to resume (exit code 130 or 143)."""
    from sandboxes.console import interrupted, interrupts, setup_logging

    argv = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in argv):
        print(usage())
        return 0
    setup_logging()
    path = argv[0] if argv and "=" not in argv[0] else None
    overrides = argv[1:] if path else argv
    try:
        config = load_config(path, overrides)
    except ConfigError as exc:  # bad input: one line that names the file or field, no traceback
        sys.exit(f"trainer.train: {exc}")
    with interrupts():
        try:
            train(config)
        except (TaskError, ConfigError) as exc:  # a task source or id, a tracker package: one line
            sys.exit(f"trainer.train: {exc}")
        except ManifestError as exc:  # a damaged checkpoint or model folder: the file and why
            sys.exit(f"trainer.train: damaged: {exc}")
        except RayStartError as exc:  # the machine or the cluster: one line, nothing to resume
            sys.exit(f"trainer.train: {exc}")
        except KeyboardInterrupt as exc:
            kept = getattr(exc, "kept", f"nothing to keep ({config.run.output_dir}/{config.run.name})")
            return interrupted(exc, kept)
        except Exception as exc:
            if not lost_actor(exc):
                raise
            sys.exit(f"trainer.train: {lost_actor_line(exc, config)}")
    return 0


def lost_actor(exc: BaseException) -> bool:
    """Whether `exc` is a Ray actor's process or node dying (infrastructure: the node was lost,
    the process killed or out of memory), not an error raised by our code."""
    ray = sys.modules.get("ray")
    return ray is not None and isinstance(exc, ray.exceptions.RayActorError)


def lost_actor_line(exc: BaseException, config) -> str:
    """One line for a lost actor: what died, and how to go on from the newest checkpoint."""
    from pathlib import Path

    from trainer.checkpoints import latest_checkpoint

    run_dir = Path(config.run.output_dir) / config.run.name
    newest = latest_checkpoint(run_dir, verify=False)
    cause = " ".join(str(exc).split())[:200]
    kept = f"checkpoints up to {newest.name} are kept" if newest else "no checkpoint was written yet"
    return (
        f"a Ray actor died ({type(exc).__name__}: {cause}); a lost node or a killed process, not a bug in the "
        f"run; {kept} in {run_dir}: run the same command with run.resume=auto to go on"
    )


if __name__ == "__main__":
    sys.exit(main())
