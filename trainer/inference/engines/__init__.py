"""Inference engines behind one protocol; `make_engine` imports a backend only when named."""

from __future__ import annotations

from trainer.inference.engines.base import Engine, EngineAsleepError, EngineError, Generation

ENGINES = ("hf", "openai", "vllm")

__all__ = ["ENGINES", "Engine", "EngineAsleepError", "EngineError", "Generation", "make_engine"]


def make_engine(
    name: str, model: str, *, seed: int = 0, base_url: str | None = None, sleep_mode: bool = False
) -> Engine:
    """An engine of backend `name` serving `model` (a name or folder; for `openai`, the
    served model's name at `base_url`). `sleep_mode`: a vLLM engine that can `sleep` and
    `wake` (vLLM's `enable_sleep_mode`, chosen at construction; the hf engine always can)."""
    if name == "hf":
        from trainer.inference.engines.hf import HFEngine
        from trainer.inference.models import load_policy, load_tokenizer

        return HFEngine(load_policy(model, seed=seed), pad_id=load_tokenizer(model).pad_token_id or 0)
    if name == "openai":
        if not base_url:
            raise ValueError("the openai engine needs base_url, e.g. http://localhost:8000/v1")
        from trainer.inference.engines.openai import OpenAIEngine

        return OpenAIEngine(base_url, model)
    if name == "vllm":
        try:
            from trainer.inference.engines.vllm import VLLMEngine
        except ImportError as exc:
            raise RuntimeError(
                f"the vllm engine needs vLLM and a CUDA GPU (pip install '.[gpu]'): {exc}; "
                "on CPU use engine=hf, or serve the model elsewhere and use engine=openai"
            ) from exc
        return VLLMEngine(model, enable_sleep_mode=sleep_mode)
    raise ValueError(f"unknown engine {name!r}; known: {', '.join(ENGINES)}")
