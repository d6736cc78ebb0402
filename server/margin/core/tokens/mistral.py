"""Mistral's chat framing (instruct tokenizer v3, the version of the Tekken files mistral-common
ships), counted exactly: special tokens are single tokens, text between them is counted whole.

    <s>[INST]user[/INST]assistant</s>[INST]system\\n\\nlast user[/INST]

Consecutive messages of one role are joined with a blank line (empty ones add nothing); every system message's text goes,
joined the same way, in front of the last user message; a conversation that opens with the
assistant gets an empty [INST][/INST] before it; an assistant message loses trailing spaces.
"""

from __future__ import annotations

from typing import Callable, Sequence

from margin.core.llm import ChatMessage
from margin.core.tokens.counter import ChatFraming

BOS = EOS = INST = END_INST = 1


def _merge_runs(messages: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    merged: list[tuple[str, str]] = []
    for message in messages:
        if merged and merged[-1][0] == message.role:
            parts = [part for part in (merged[-1][1], message.content) if part]
            merged[-1] = (message.role, "\n\n".join(parts))
        else:
            merged.append((message.role, message.content))
    return merged


class MistralV3Framing(ChatFraming):
    def count(self, messages: Sequence[ChatMessage], count_text: Callable[[str], int]) -> int:
        turns = _merge_runs(messages)
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
                total += INST + count_text(text) + END_INST
            else:
                total += count_text(text.rstrip(" ")) + EOS  # trailing spaces are not sent
        return total
