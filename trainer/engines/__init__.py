"""Inference engines behind one protocol; `make_engine` imports a backend only when named."""

from __future__ import annotations

from trainer.engines.base import Engine, Generation

__all__ = ["Engine", "Generation", "make_engine"]


def make_engine(name: str, model) -> Engine:
    """An engine of backend `name` serving `model` (a transformers causal LM)."""
    if name == "hf":
        from trainer.engines.hf import HFEngine

        return HFEngine(model)
    if name == "vllm":
        raise NotImplementedError(
            "the vllm engine is not built yet (it needs a CUDA GPU and the 'gpu' extra); use engine=hf"
        )
    raise ValueError(f"unknown engine {name!r}; known: hf, vllm")
