"""Loading the policy and building the critic.

`load_policy` takes any Hugging Face causal LM by name or path. The shipped `tiny` model
(`trainer/inference/assets/tiny`: a config, a tokenizer and a chat template, no weights;
made by `scripts/build_tiny_model.py`) is randomly initialised from a seed, so tests and the
CPU demo need no model hub.

`reserve_value_tokens` gives a policy SAPO's two value tokens (w+ and w-): one model is
then both policy and critic, and no `ValueModel` is built.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

TINY_MODEL = Path(__file__).parent / "assets" / "tiny"


def resolve_model_path(name: str) -> str:
    return str(TINY_MODEL) if name == "tiny" else name


def verify_model_folder(name: str) -> None:
    """Refuse a damaged export before loading it (`ManifestError`: the first bad file and why).

    A folder with a `manifest.json` (every export this project writes) must match it; so must
    a checkpoint's `policy/` folder (its parent holds `state.json` or `dcp/`), whose missing
    manifest means damage. A hub name, the shipped `tiny` and a foreign Hugging Face folder
    without a manifest load as they are."""
    from trainer.inference.manifest import MANIFEST, verify

    folder = Path(resolve_model_path(name))
    if name == "tiny" or not folder.is_dir():
        return
    in_checkpoint = (folder.parent / "state.json").exists() or (folder.parent / "dcp").is_dir()
    if (folder / MANIFEST).exists() or in_checkpoint:
        verify(folder)


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model_path(name))


def load_policy(name: str, *, seed: int = 0, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A causal LM: pretrained weights when the folder or hub name has them, else (the
    shipped `tiny` config, or a folder with only a config) random weights from `seed`.
    An exported folder is verified against its manifest first (`verify_model_folder`)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    verify_model_folder(name)
    path = resolve_model_path(name)
    folder = Path(path)
    has_weights = not folder.is_dir() or any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))
    if has_weights:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), dtype=dtype)


def causal_attention_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """The mask to hand a causal LM: None when every row is right-padded (its ones are a
    prefix), else the mask itself.

    Under a causal mask a real token never attends to the padding that follows it, so a
    right-padded batch computes the same real-token outputs without the padding mask, and
    without an explicit mask SDPA runs its fused causal kernel instead of materialising a
    [B, heads, T, T] mask (measured: a learner step on 8 episodes of ~2,000 tokens 1.8x
    faster on CPU, outputs identical)."""
    if attention_mask is None or attention_mask.dim() == 4:  # a 4D mask is custom: kept as it is
        return attention_mask
    mask = attention_mask.bool()
    right_padded = bool((mask[:, 1:] <= mask[:, :-1]).all()) and bool(mask[:, 0].all())
    return None if right_padded else attention_mask


VALUE_TOKENS = ("<|value_plus|>", "<|value_minus|>")
"""SAPO's w+ and w-, as the tokenizer names them when it has room for them."""


def value_token_ids(policy: nn.Module) -> tuple[int, int] | None:
    """The (w+, w-) ids recorded in `policy.config` by `reserve_value_tokens`, if any."""
    ids = getattr(policy.config, "value_token_ids", None)
    return (int(ids[0]), int(ids[1])) if ids else None


@torch.no_grad()
def reserve_value_tokens(policy: nn.Module, tokenizer=None) -> tuple[int, int]:
    """Give `policy` SAPO's two value tokens w+ and w- and return their ids (arXiv 2608.19842).

    Two rows are appended to the vocabulary (embeddings and lm_head, tied or not), so the ids
    are the old row count and the one after it: they can never collide with a real token,
    and an engine built from the original checkpoint sees them as rows it never had (the
    hf engine bans such rows when a weight update brings them). Both output rows start as
    the mean of the others, identical, so `z_w+ - z_w-` is 0 and every value starts at 0
    (as a fresh critic head does). The ids are recorded in `policy.config.value_token_ids`:
    they travel with every `save_pretrained` export, and a policy that already has them (a
    SAPO checkpoint) is returned unchanged.

    `tokenizer`: when its length equals the row count (the shipped tiny tokenizer), the two
    tokens are added to it as special tokens `<|value_plus|>` / `<|value_minus|>`, so decoded
    trajectories and exported tokenizers name them. A vocabulary padded beyond its tokenizer
    (e.g. Qwen's 151,936 rows for 151,665 tokens) keeps the tokenizer as it is: the ids then
    have no text at all, which is what a readout needs.
    """
    recorded = value_token_ids(policy)
    rows = policy.get_input_embeddings().weight.shape[0]
    if recorded is not None:
        if max(recorded) >= rows:
            raise ValueError(f"policy records value tokens {recorded} but has only {rows} vocabulary rows")
        return recorded
    plus, minus = rows, rows + 1
    if tokenizer is not None and len(tokenizer) == rows:
        from tokenizers import AddedToken

        tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in VALUE_TOKENS], special_tokens=True)
        if tokenizer.convert_tokens_to_ids(list(VALUE_TOKENS)) != [plus, minus]:
            raise ValueError(f"tokenizer gave the value tokens other ids than rows {plus} and {minus}")
    policy.resize_token_embeddings(rows + 2, mean_resizing=False)
    output = policy.get_output_embeddings()
    output.weight[rows:] = output.weight[:rows].mean(0)
    if getattr(output, "bias", None) is not None:
        output.bias[rows:] = output.bias[:rows].mean()
    embeddings = policy.get_input_embeddings().weight
    if embeddings is not output.weight:  # untied: the input rows only matter if text ever holds them
        embeddings[rows:] = embeddings[:rows].mean(0)
    policy.config.value_token_ids = [plus, minus]
    return plus, minus


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

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Values [B, T]; a 4D `attention_mask` with `position_ids` runs a packed prefix tree
        (`trainer.learner.tree`)."""
        hidden = self.backbone(
            input_ids=input_ids, attention_mask=causal_attention_mask(attention_mask), position_ids=position_ids
        ).last_hidden_state
        # sum over the size-1 axis, not squeeze: a fresh tensor, not a view (FSDP2 hooks views badly)
        return self.head(hidden).sum(-1)
