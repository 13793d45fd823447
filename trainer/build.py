"""The one place a `TrainConfig` becomes objects: the learner, the rollout engine, sandboxes.

Classes take plain parameters; only this module reads configs. The training entry points
(`trainer.train`, the Ray actors of `trainer.orchestrator`) build through here, so a run on
one laptop and a run spread over Ray actors construct exactly the same things.
"""

from __future__ import annotations

from pathlib import Path

from trainer.config import TrainConfig


def build_learner(config: TrainConfig, *, mesh=None):
    """(learner, tokenizer) for `config`: the policy and, when the algorithm uses one, its
    critic. SAPO gets no critic: its policy gains the two value tokens (w+, w-) instead, and
    the returned tokenizer names them (`trainer.inference.models.reserve_value_tokens`)."""
    from trainer.algorithms import get_algorithm
    from trainer.inference.models import ValueModel, load_policy, load_tokenizer, reserve_value_tokens
    from trainer.learner import Learner

    spec = get_algorithm(config.algorithm)
    tokenizer = load_tokenizer(config.model)
    policy = load_policy(config.model, seed=config.seed)
    critic = ValueModel.from_policy(policy) if spec.critic == "separate" else None
    value_ids = reserve_value_tokens(policy, tokenizer) if spec.critic == "shared" else None
    learner = Learner(
        policy,
        critic,
        pad_id=tokenizer.pad_token_id,
        algorithm=config.algorithm,
        clip_low=config.clip_low,
        clip_high=config.clip_high,
        gae_lambda=config.gae_lambda,
        freeze_critic_attention=config.freeze_critic_attention,
        value_token_ids=value_ids,
        tau_v=config.tau_v,
        r_max=config.r_max,
        c_v=config.c_v,
        c_q=config.c_q,
        beta=config.beta,
        c_h=config.c_h,
        lr=config.lr,
        critic_lr=config.critic_lr,
        eps_low=config.eps_low,
        eps_high=config.eps_high,
        critic_steps=config.critic_steps,
        gamma=config.gamma,
        lambda_alpha=config.lambda_alpha,
        temperature=config.temperature,
        aggregation=config.loss_aggregation,
        mesh=mesh,
    )
    return learner, tokenizer


def engine_model(config: TrainConfig) -> str:
    """The model name or folder the rollout engine serves: the config's model, except for
    `engine=vllm` under an algorithm with a shared value head (SAPO) when that model lacks
    the value rows. vLLM cannot add vocabulary rows in place, so the engine then serves an
    export of the grown policy (`trainer.inference.engines.vllm.export_with_value_tokens`), made once
    under `<output_dir>/engine-models/` and reused, and the learner's updates fit it."""
    if config.engine != "vllm":
        return config.model
    from trainer.algorithms import get_algorithm
    from trainer.inference.engines.vllm import export_with_value_tokens, recorded_value_token_ids, sapo_export_folder
    from trainer.inference.models import resolve_model_path

    if get_algorithm(config.algorithm).critic != "shared" or recorded_value_token_ids(resolve_model_path(config.model)):
        return config.model
    folder = sapo_export_folder(config.model, seed=config.seed, root=Path(config.output_dir) / "engine-models")
    return str(export_with_value_tokens(config.model, folder, seed=config.seed))


def build_engine(config: TrainConfig):
    """The rollout engine named by `config.engine`, serving `engine_model(config)`."""
    from trainer.inference.engines import make_engine

    return make_engine(config.engine, engine_model(config), seed=config.seed)


def sandbox_factory(backend: str):
    """A picklable `spec -> Sandbox` callable for `backend` (it crosses to Ray workers)."""
    return _SandboxFactory(backend)


class _SandboxFactory:
    def __init__(self, backend: str) -> None:
        self.backend = backend

    def __call__(self, spec):
        from sandboxes import make_sandbox

        return make_sandbox(spec, self.backend)
