"""The `recall` tool: a model that supports tool calls asks for what a pointer stood for and
gets the exact original content back, with the file's fingerprint, or is told that the file has
changed since, that nothing is behind the pointer, or that the content does not fit.

Pure: what the tool is, how a call is read, what each answer says, and the bounds of the loop.
The service (services/chat_tools.py) resolves pointers against the stored thread, budgets each
answer against the window, and runs the loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from margin.core import pointers
from margin.core.llm import ToolCall

NAME = "recall"
TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": "The exact content an earlier turn showed, behind a pointer such as [t12 parser.py].",
        "parameters": {
            "type": "object",
            "properties": {"pointer": {"type": "string", "description": "the pointer, e.g. [t12 parser.py]"}},
            "required": ["pointer"],
        },
    },
}
TOOLS = (TOOL,)

MAX_CALLS = 3
"""Calls answered per turn. After that (or when an answer cannot fit) the model is asked once
more with `tool_choice: none`, so it must answer with what it has."""

Status = Literal["recalled", "changed since", "not found", "not a pointer", "over budget", "over the limit"]


@dataclass(frozen=True)
class Answer:
    """One call's answer: what the tool message says, and for the report what it recalled."""

    call: ToolCall
    status: Status
    text: str
    pointer: str | None = None
    fingerprint: str | None = None

    @property
    def recalled(self) -> bool:
        """It carries the content (the file may have changed since)."""
        return self.status in ("recalled", "changed since")


def pointer_of(call: ToolCall) -> str | None:
    """The pointer a call asks for: `{"pointer": "[t12 parser.py]"}` (a bare string argument is
    taken too); None when the call is not a recall of a pointer."""
    if call.name != NAME:
        return None
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return None
    wanted = arguments.get("pointer") if isinstance(arguments, dict) else arguments
    parsed = pointers.parse_pointer(wanted) if isinstance(wanted, str) else None
    return pointers.pointer(*parsed) if parsed is not None else None


def recalled(call: ToolCall, found: pointers.Recalled, changed: bool | None) -> Answer:
    """The exact content, after one line saying what it is (and its fingerprint for a file)."""
    parsed = pointers.parse_pointer(found.pointer)
    turn = parsed[0] if parsed else 0
    head = f"{found.pointer}: exactly as shown in turn {turn}"
    if found.fingerprint:
        head += f" (sha256 {found.fingerprint})"
    if changed:
        head += ". The file has changed since: its current text, where shown, is the newer one"
    status: Status = "changed since" if changed else "recalled"
    return Answer(call, status, f"{head}.\n\n{found.content}", found.pointer, found.fingerprint)


def not_found(call: ToolCall, wanted: str | None) -> Answer:
    if wanted is None:
        return Answer(call, "not a pointer", f'{NAME} takes {{"pointer": "[t12 parser.py]"}}: one of the pointers '
                      "shown in this conversation.")
    return Answer(call, "not found", f"Nothing in this conversation is {wanted}: check the turn and the name.",
                  wanted)


def over_budget(call: ToolCall, wanted: str, tokens: int, room: int) -> Answer:
    return Answer(call, "over budget", f"{wanted} is {tokens} tokens; only {room} are free in this request. "
                  "Answer without it, or ask the user to show you the part you need.", wanted)


def over_the_limit(call: ToolCall) -> Answer:
    return Answer(call, "over the limit", f"No more recalls in this turn (at most {MAX_CALLS}): answer with what "
                  "you have.")
