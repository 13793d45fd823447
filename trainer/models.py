"""Loading the policy and building the critic.

`load_policy` takes any Hugging Face causal LM by name or path. The shipped `tiny` model
(`trainer/assets/tiny`: a config, a tokenizer and a chat template, no weights) is
randomly initialised from a seed, so tests and the CPU demo need no model hub.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

TINY_MODEL = Path(__file__).parent / "assets" / "tiny"


def resolve_model_path(name: str) -> str:
    return str(TINY_MODEL) if name == "tiny" else name


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model_path(name))


def load_policy(name: str, *, seed: int = 0, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A causal LM: pretrained weights when the folder or hub name has them, else (the
    shipped `tiny` config, or a folder with only a config) random weights from `seed`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = resolve_model_path(name)
    folder = Path(path)
    has_weights = not folder.is_dir() or any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))
    if has_weights:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), dtype=dtype)


class ValueModel(nn.Module):
    """A critic: a transformer backbone and a scalar head, one value per token position.

    `forward(input_ids)[:, t]` is the value of the state after tokens `0..t`, i.e. of the
    state in which token t+1 is chosen (SAO: token-level values).
    """

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_policy(cls, policy: nn.Module) -> ValueModel:
        """A critic whose backbone starts as a copy of the policy's (as SAO initialises it)."""
        import copy

        backbone = copy.deepcopy(policy.get_decoder() if hasattr(policy, "get_decoder") else policy.model)
        return cls(backbone, policy.config.hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        # sum over the size-1 axis, not squeeze: a fresh tensor, not a view (FSDP2 hooks views badly)
        return self.head(hidden).sum(-1)
