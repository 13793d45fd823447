"""Turning an episode into token ids with the tokenizer's chat template, append-only.

The first prompt is rendered by the chat template (system prompt, tools, issue). After
that, ids are only ever appended: the policy's sampled ids as they are, and each
observation rendered as the template would render a tool response, so the sequence the
learner trains on is the one the engine sampled from.
"""

from __future__ import annotations

from typing import Any

END_OF_TURN = "<|im_end|>"


class ChatFormat:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.end_id = tokenizer.convert_tokens_to_ids(END_OF_TURN)
        if self.end_id is None or self.end_id == tokenizer.unk_token_id:
            raise ValueError(f"tokenizer has no {END_OF_TURN} token; a ChatML template is required")

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def prompt_ids(self, system: str, user: str, tools: list[dict] | None) -> list[int]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        text = self.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
        return self.encode(text)

    def observation_ids(self, observation: str, *, turn_closed: bool) -> list[int]:
        """Ids that follow a policy turn: the tool response and the next assistant header.
        `turn_closed` is False when generation stopped on length, before `<|im_end|>`."""
        prefix = "" if turn_closed else END_OF_TURN
        text = (
            f"{prefix}\n<|im_start|>user\n<tool_response>\n{observation}\n</tool_response>"
            f"{END_OF_TURN}\n<|im_start|>assistant\n"
        )
        return self.encode(text)
