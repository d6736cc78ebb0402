"""Memories: facts a user pins for Margin to keep in mind ("we use pytest, never unittest"; "the
API base is /v2"), and the rules a memory follows.

A workspace memory applies only in its workspace folder; a global one in every workspace. The
rules are pure functions raising `InvalidMemory` with a message a person can act on; both
stores apply them (`checked`), so nothing else can be stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Scope = Literal["workspace", "global"]
SCOPES: tuple[Scope, ...] = ("workspace", "global")
MAX_TEXT_CHARS = 2000
"""A memory is a fact, not a document: longer text belongs in the project's instruction files."""


@dataclass(frozen=True)
class Memory:
    id: str
    """short and stable across restarts (the database row id, in decimal)"""
    text: str
    scope: Scope
    workspace: str
    """the workspace folder URI; '' for a global memory"""
    created: float
    """epoch seconds"""

    def applies_in(self, workspace: str) -> bool:
        return self.scope == "global" or self.workspace == workspace


class InvalidMemory(ValueError):
    """A memory that cannot be stored; the message says why and what to do."""


def memory_text(text: str) -> str:
    """`text` stripped: non-empty and at most MAX_TEXT_CHARS characters."""
    stripped = text.strip()
    if not stripped:
        raise InvalidMemory("a memory needs some text; this one is empty (or only whitespace)")
    if len(stripped) > MAX_TEXT_CHARS:
        raise InvalidMemory(f"a memory holds at most {MAX_TEXT_CHARS:,} characters; this one has "
                            f"{len(stripped):,}: shorten it, or split it into several memories")
    return stripped


def memory_scope(scope: str) -> Scope:
    if scope not in SCOPES:
        raise InvalidMemory(f"a memory's scope is \"workspace\" (this workspace folder) or \"global\" "
                            f"(every workspace), not {scope[:40]!r}")
    return scope


def memory_workspace(scope: Scope, workspace: str) -> str:
    """The workspace a memory of `scope` is stored for: '' for a global one; a workspace memory
    needs a workspace folder."""
    if scope == "global":
        return ""
    if not workspace:
        raise InvalidMemory("there is no workspace folder to remember this for: open a folder, or "
                            "remember it with scope \"global\" (every workspace)")
    return workspace


def checked(text: str, scope: str, workspace: str) -> tuple[str, Scope, str]:
    """A new memory's (text, scope, workspace) as stored, or InvalidMemory."""
    valid_scope = memory_scope(scope)
    return memory_text(text), valid_scope, memory_workspace(valid_scope, workspace)


def newest_first(memories: Iterable[Memory]) -> list[Memory]:
    """Newest first; ids break ties between memories made in the same instant."""
    return sorted(memories, key=lambda m: (m.created, _order(m.id)), reverse=True)


def for_prompt(memories: Iterable[Memory]) -> list[Memory]:
    """Oldest first, as a prompt shows them: a new memory goes at the end, so the start of the
    prompt stays the same (and a backend's prompt cache keeps it)."""
    return newest_first(memories)[::-1]


def _order(memory_id: str) -> tuple[int, str]:
    return (int(memory_id), "") if memory_id.isascii() and memory_id.isdigit() else (0, memory_id)
