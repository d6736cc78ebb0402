"""The markup a model wraps its code in, for inline completion's post-processing
(core/completion/postprocess.py): a model family's special tokens, and `<think>` blocks."""

from __future__ import annotations

import re

END_TOKENS = ("<|endoftext|>", "<|file_sep|>", "<|fim_pad|>", "<|im_end|>", "<|eot_id|>",
              "<|end_of_text|>", "<|end|>", "<|file_separator|>", "<EOT>", "<file_sep>",
              "<｜end▁of▁sentence｜>")
"""Tokens after which nothing the model wrote belongs to the middle."""
KNOWN_TOKENS = END_TOKENS + (
    "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|im_start|>",
    "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>", "<repo_name>",
    "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>")
"""Special tokens stripped whatever the family; `[SUFFIX]`, `<PRE>` and the like can be code,
so they count only when the context names them."""
_END_LIKE = re.compile(r"endof|end_of|eot|eos\b|file_sep|fim_pad|im_end|</s>", re.IGNORECASE)
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_LEADING_BLANK_LINES = re.compile(r"^(?:[ \t]*\n)+")

def tokens_of(fim_tokens: tuple[str, ...]) -> list[str]:
    named = {t.strip() for t in fim_tokens if t.strip()}
    return sorted(named | set(KNOWN_TOKENS), key=len, reverse=True)


def is_end(token: str) -> bool:
    return token in END_TOKENS or bool(_END_LIKE.search(token))


def strip_leading_tokens(text: str, tokens: list[str]) -> str:
    """`text` without the special tokens it starts with; empty when one of them ends the text."""
    while True:
        body = text.lstrip()
        token = next((t for t in tokens if body.startswith(t)), None)
        if token is None:
            return text
        if is_end(token):
            return ""
        text = body[len(token):]


def cut_at_tokens(text: str, tokens: list[str]) -> str:
    """`text` up to its first special token: what follows one is not the middle."""
    cut = min((i for t in tokens if (i := text.find(t)) >= 0), default=-1)
    return text if cut < 0 else text[:cut]


def strip_thinking(text: str) -> str:
    """`text` without `<think>` blocks. Nothing when a block opened at the start never closes;
    everything before a `</think>` with no opening (the template opened it)."""
    close = text.find(_THINK_CLOSE)
    if close >= 0 and _THINK_OPEN not in text[:close]:
        text = _LEADING_BLANK_LINES.sub("", text[close + len(_THINK_CLOSE):])
    while text.lstrip().startswith(_THINK_OPEN):
        body = text.lstrip()
        close = body.find(_THINK_CLOSE)
        if close < 0:
            return ""
        text = _LEADING_BLANK_LINES.sub("", body[close + len(_THINK_CLOSE):])
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    opened = text.find(_THINK_OPEN)
    text = text if opened < 0 else text[:opened]
    close = text.rfind(_THINK_CLOSE)  # one more close with no opening: what comes before it was thought too
    return text if close < 0 else _LEADING_BLANK_LINES.sub("", text[close + len(_THINK_CLOSE):])
