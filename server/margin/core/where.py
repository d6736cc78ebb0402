"""Where a request is about — the document, the selection or cursor in it, the thread — kept
apart from what the user asked."""

from __future__ import annotations

from dataclasses import dataclass

from margin.core.vfs import Position, Range


@dataclass(frozen=True)
class Where:
    text_document: str | None = None
    """the active document's URI"""
    selection: Range | None = None
    position: Position | None = None
    """the cursor"""
    thread_id: str | None = None
    """a thread named by the client; None: the canonical thread of the document's workspace"""


NOWHERE = Where()
