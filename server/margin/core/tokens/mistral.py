"""Mistral's chat framing, counted exactly: special tokens are single tokens, and the text
between them is counted whole. Two instruct versions matter for chat:

v3 (Mistral Nemo, and the version of the Tekken files mistral-common ships):

    <s>[INST]user[/INST]assistant</s>[INST]system\n\nlast user[/INST]

  every system message's text goes, joined with blank lines, in front of the last user
  message; a conversation that opens with the assistant gets an empty [INST][/INST] first.

v7 (current models: Devstral, Mistral Small 3, Magistral, ...):

    <s>[SYSTEM_PROMPT]system[/SYSTEM_PROMPT][INST]user[/INST]assistant</s>[INST]user[/INST]

  each system message is its own turn, where it stands.

In both, consecutive user (or assistant) messages are joined with a blank line (empty ones add
nothing), and an assistant message loses its trailing spaces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from margin.core.llm import ChatMessage
from margin.core.tokens.counter import ChatFraming

InstructVersion = Literal["v3", "v7"]
BOS = EOS = 1
PAIR = 2  # [INST] … [/INST], or [SYSTEM_PROMPT] … [/SYSTEM_PROMPT]


def _merge_runs(messages: Sequence[ChatMessage], roles: tuple[str, ...]) -> list[tuple[str, str]]:
    """Consecutive messages of one of `roles` joined with a blank line."""
    merged: list[tuple[str, str]] = []
    for message in messages:
        if merged and merged[-1][0] == message.role and message.role in roles:
            parts = [part for part in (merged[-1][1], message.content) if part]
            merged[-1] = (message.role, "\n\n".join(parts))
        else:
            merged.append((message.role, message.content))
    return merged


class MistralFraming(ChatFraming):
    json_tool_results = True  # [TOOL_RESULTS] {"content": "...", "call_id": ...} [/TOOL_RESULTS]

    def __init__(self, version: InstructVersion) -> None:
        self.version = version

    def count(self, messages: Sequence[ChatMessage], count_text: Callable[[str], int]) -> int:
        if self.version == "v3":
            return self._count_v3(messages, count_text)
        total = BOS
        for role, text in _merge_runs(messages, ("user", "assistant")):
            if role == "assistant":
                total += count_text(text.rstrip(" ")) + EOS
            else:
                total += PAIR + count_text(text)
        return total

    @staticmethod
    def _count_v3(messages: Sequence[ChatMessage], count_text: Callable[[str], int]) -> int:
        turns = _merge_runs(messages, ("system", "user", "assistant"))
        system = "\n\n".join(text for role, text in turns if role == "system" and text)
        turns = [(role, text) for role, text in turns if role != "system"]
        if turns and turns[0][0] == "assistant":
            turns.insert(0, ("user", ""))
        last_user = max((i for i, (role, _) in enumerate(turns) if role == "user"), default=None)
        total = BOS
        for index, (role, text) in enumerate(turns):
            if role == "user":
                if index == last_user and system:
                    text = f"{system}\n\n{text}"
                total += PAIR + count_text(text)
            else:
                total += count_text(text.rstrip(" ")) + EOS
        return total
