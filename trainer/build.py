"""Where a `TrainConfig` becomes what needs all of it: the learner (each learner rank builds
it here), the model the rollout engine serves (`engine_model`, which the recipe hands the
rollout workers: they build the engine from that name) and the sandbox factory.

Components take their own config section (`AlgorithmConfig`, `LearnerConfig`,
`RolloutConfig`, ...) or plain parameters; only this module and the recipe read the whole
`TrainConfig`, so a run on one laptop and a run spread over Ray actors construct the same
things.
"""

from __future__ import annotations

from pathlib import Path

from trainer.config import TrainConfig


def build_learner(config: TrainConfig, *, mesh=None):
    """(learner, tokenizer) for `config`: the policy and, when the algorithm uses one, its
    critic. SAPO gets no critic: its policy gains the two value tokens (w+, w-) instead, and
    the returned tokenizer names them (`trainer.inference.models.reserve_value_tokens`).
    The learner takes only its sections: `algorithm`, `learner`, and the sampling
    temperature it must score tokens at."""
    from trainer.algorithms.registry import get_algorithm
    from trainer.inference.models import ValueModel, load_policy, load_tokenizer, reserve_value_tokens
    from trainer.learner import Learner

    spec = get_algorithm(config.algorithm.name)
    tokenizer = load_tokenizer(config.model.name)
    policy = load_policy(config.model.name, seed=config.run.seed)
    critic = ValueModel.from_policy(policy) if spec.critic == "separate" else None
    value_ids = reserve_value_tokens(policy, tokenizer) if spec.critic == "shared" else None
    learner = Learner(
        policy,
        critic,
        pad_id=tokenizer.pad_token_id,
        algorithm=config.algorithm,
        optim=config.learner,
        temperature=config.rollout.temperature,
        value_token_ids=value_ids,
        mesh=mesh,
    )
    return learner, tokenizer


def engine_model(config: TrainConfig) -> str:
    """The model name or folder the rollout engine serves: the config's model, except for
    `engine=vllm` under an algorithm with a shared value head (SAPO) when that model lacks
    the value rows. vLLM cannot add vocabulary rows in place, so the engine then serves an
    export of the grown policy (`trainer.inference.engines.vllm.export_with_value_tokens`), made once
    under `<output_dir>/engine-models/` and reused, and the learner's updates fit it."""
    if config.model.engine != "vllm":
        return config.model.name
    from trainer.algorithms.registry import get_algorithm
    from trainer.inference.engines.vllm import export_with_value_tokens, recorded_value_token_ids, sapo_export_folder
    from trainer.inference.models import resolve_model_path

    model, seed = config.model.name, config.run.seed
    if get_algorithm(config.algorithm.name).critic != "shared" or recorded_value_token_ids(resolve_model_path(model)):
        return model
    folder = sapo_export_folder(model, seed=seed, root=Path(config.run.output_dir) / "engine-models")
    return str(export_with_value_tokens(model, folder, seed=seed))


def sandbox_factory(backend: str):
    """A picklable `spec -> Sandbox` callable for `backend` (it crosses to Ray workers)."""
    return _SandboxFactory(backend)


class _SandboxFactory:
    def __init__(self, backend: str) -> None:
        self.backend = backend

    def __call__(self, spec):
        from sandboxes import make_sandbox

        return make_sandbox(spec, self.backend)
