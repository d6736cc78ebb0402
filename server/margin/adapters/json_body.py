"""Chat request bodies as JSON bytes, the same bytes `json.dumps(body, ensure_ascii=False,
separators=(",", ":"))` makes (what httpx sends for `json=`), with the message texts' JSON kept:
a thread's prompts send the same long texts (its history, the open files' blocks) request
after request, and escaping them again was most of what encoding a body cost."""

from __future__ import annotations

import json
from typing import Any

from margin.core.text_memo import TextMemo

MAX_CHARS = 8 * 1024 * 1024
"""Texts kept with their JSON, in characters (`TextMemo`)."""

_literals: TextMemo[str] = TextMemo(MAX_CHARS)


def literal(text: str) -> str:
    """`text` as a JSON string."""
    found = _literals.get(text)
    if found is None:
        found = json.dumps(text, ensure_ascii=False)
        _literals.put(text, found)
    return found


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def chat_body(body: dict[str, Any]) -> bytes:
    """`body` (its `messages` first, each `{"role", "content"}` in that order, or any other
    shape) encoded."""
    parts = []
    for message in body["messages"]:
        if len(message) == 2 and isinstance(message.get("content"), str) and next(iter(message)) == "role":
            parts.append(f'{{"role":{literal(message["role"])},"content":{literal(message["content"])}}}')
        else:
            parts.append(_dumps(message))
    head = '{"messages":[' + ",".join(parts) + "]"
    rest = _dumps({key: value for key, value in body.items() if key != "messages"})
    return (head + ("," + rest[1:] if len(rest) > 2 else "}")).encode("utf-8")
