"""Next edits over ACP (the unstable `nes/*` methods and `document/*` events): the client opens a
next-edit session, tells Margin what happens to its documents, and asks for the next edit at the
cursor. Served by Margin's next-edit service (services/next_edit.py) exactly as the language
server's `margin/nextEdit` is: the same profile (`nextEdit`, off until turned on), prompts,
silence rules and cache; edits in the document's position encoding (UTF-16), made for the
version asked about or none.

Accept and reject are its history: an accepted suggestion's edit arrives as the document's next
change; a rejected one is not offered again for the document as it is.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from acp import RequestError
from acp.schema import (
    AcceptNesNotification,
    CloseNesRequest,
    DidChangeDocumentNotification,
    DidCloseDocumentNotification,
    DidOpenDocumentNotification,
    NesCapabilities,
    NesDocumentDidChangeCapabilities,
    NesDocumentDidCloseCapabilities,
    NesDocumentDidOpenCapabilities,
    NesDocumentEventCapabilities,
    NesEditSuggestionVariant,
    NesEventCapabilities,
    NesTextEdit,
    Position,
    Range,
    RejectNesNotification,
    StartNesRequest,
    SuggestNesRequest,
)

from margin import logs
from margin.core import vfs
from margin.services.errors import RequestError as MarginError
from margin.services.registry import Services

log = logging.getLogger(__name__)

NES_CAPABILITIES = NesCapabilities(events=NesEventCapabilities(document=NesDocumentEventCapabilities(
    did_open=NesDocumentDidOpenCapabilities(), did_change=NesDocumentDidChangeCapabilities(sync_kind="incremental"),
    did_close=NesDocumentDidCloseCapabilities())))
"""what Margin wants told: documents opened, changed (incrementally) and closed; no other context
(it reads the workspace itself)"""


@dataclass
class NesSession:
    id: str
    documents: set[str] = field(default_factory=set)
    offered: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    """each suggestion offered: its document, version and fingerprint"""
    rejected: set[tuple[str, int, str]] = field(default_factory=set)
    """the document states whose suggestion was rejected: nothing is offered again for them"""


class NextEdits:
    def __init__(self, services: Services, folders: set[str]) -> None:
        self.services = services
        self.app = services.app
        self.folders = folders
        """the workspace folders Margin reads (the agent's sessions' too)"""
        self.sessions: dict[str, NesSession] = {}
        self._ids = itertools.count(1)

    def _session(self, session_id: str) -> NesSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.resource_not_found(session_id)
        return session

    def _keeping_history(self) -> bool:
        return self.app.settings.current.profile("nextEdit").enabled

    # --- requests ------------------------------------------------------------------------------

    async def start(self, params: dict[str, Any]) -> dict[str, Any]:
        request = StartNesRequest.model_validate(params)
        named = [request.workspace_uri] if request.workspace_uri else []
        self.folders.update(u.rstrip("/") for u in named + [f.uri for f in request.workspace_folders or ()]
                            if u.startswith("file:///"))
        session = NesSession(f"nes-{next(self._ids)}")
        self.sessions[session.id] = session
        return {"sessionId": session.id}

    async def suggest(self, params: dict[str, Any]) -> dict[str, Any]:
        request = SuggestNesRequest.model_validate(params)
        session = self._session(request.session_id)
        file = self.app.files.get(request.uri)
        if file is None or request.uri not in session.documents:
            raise RequestError(-32602, f"{request.uri} is not open in this session: send document/didOpen first.")
        if file.version != request.version:
            return {"suggestions": []}  # asked for a version the document has moved on from
        if (request.uri, file.version, file.fingerprint) in session.rejected:
            return {"suggestions": []}
        try:
            outcome = await self.services.next_edit.suggest(request.uri, request.position.line)
        except MarginError as error:
            raise RequestError(-32602, str(error)) from None
        current = self.app.files.get(request.uri)
        if not outcome.edits or current is None or current.version != request.version \
                or current.fingerprint != outcome.fingerprint:
            log.info("acp nes silent uri=%s why=%s", logs.name(request.uri), (outcome.silence or "changed")[:60])
            return {"suggestions": []}
        encoding = self.app.files.encoding
        edits = [NesTextEdit(range=_range(current.position_at(e.start, encoding), current.position_at(e.end, encoding)),
                             new_text=e.text) for e in outcome.edits]
        first = edits[0].range.start
        suggestion_id = f"{session.id}-{next(self._ids)}"
        session.offered[suggestion_id] = (request.uri, current.version, current.fingerprint)
        suggestion = NesEditSuggestionVariant(kind="edit", id=suggestion_id, uri=request.uri, edits=edits,
                                              cursor_position=first)
        return {"suggestions": [suggestion.model_dump(mode="json", by_alias=True, exclude_none=True)]}

    async def close(self, params: dict[str, Any]) -> dict[str, Any]:
        request = CloseNesRequest.model_validate(params)
        session = self.sessions.pop(request.session_id, None)
        for uri in session.documents if session is not None else ():
            self._closed(uri)
        return {}

    # --- notifications -------------------------------------------------------------------------

    async def accepted(self, params: dict[str, Any]) -> None:
        note = AcceptNesNotification.model_validate(params)
        session = self.sessions.get(note.session_id)
        if session is not None and session.offered.pop(note.id, None) is not None:
            log.info("acp nes accepted id=%s", note.id)

    async def rejected(self, params: dict[str, Any]) -> None:
        note = RejectNesNotification.model_validate(params)
        session = self.sessions.get(note.session_id)
        state = session.offered.pop(note.id, None) if session is not None else None
        if session is not None and state is not None:
            session.rejected.add(state)
            log.info("acp nes rejected id=%s", note.id)

    async def opened(self, params: dict[str, Any]) -> None:
        note = DidOpenDocumentNotification.model_validate(params)
        session = self.sessions.get(note.session_id)
        if session is None:
            return
        session.documents.add(note.uri)
        self.app.files.open(note.uri, note.language_id, note.version, note.text)
        if self._keeping_history():
            self.services.next_edit.histories.opened(note.uri, note.text, note.version)

    async def changed(self, params: dict[str, Any]) -> None:
        note = DidChangeDocumentNotification.model_validate(params)
        if note.session_id not in self.sessions:
            return
        changes = [vfs.TextChange(c.text, None if c.range is None else vfs.Range(
            vfs.Position(c.range.start.line, c.range.start.character),
            vfs.Position(c.range.end.line, c.range.end.character))) for c in note.content_changes]
        try:
            file = self.app.files.change(note.uri, note.version, changes)
        except vfs.SyncError:
            log.warning("acp change not applied uri=%s version=%d", logs.name(note.uri), note.version)
            return
        next_edit = self.services.next_edit
        if self._keeping_history():
            next_edit.histories.changed(note.uri, file.text, file.version, time.monotonic())
            next_edit.typed(note.uri, self.app.settings.current.globals.next_edit_pause_ms / 1000)
        else:
            next_edit.closed(note.uri)

    async def closed(self, params: dict[str, Any]) -> None:
        note = DidCloseDocumentNotification.model_validate(params)
        session = self.sessions.get(note.session_id)
        if session is not None and note.uri in session.documents:
            session.documents.discard(note.uri)
            self._closed(note.uri)

    def _closed(self, uri: str) -> None:
        if not any(uri in other.documents for other in self.sessions.values()):
            self.app.files.close(uri)
            self.services.next_edit.closed(uri)

    def requests(self) -> dict[str, Any]:
        return {"nes/start": self.start, "nes/suggest": self.suggest, "nes/close": self.close}

    def notifications(self) -> dict[str, Any]:
        return {"nes/accept": self.accepted, "nes/reject": self.rejected, "document/didOpen": self.opened,
                "document/didChange": self.changed, "document/didClose": self.closed}


def _range(start: vfs.Position, end: vfs.Position) -> Range:
    return Range(start=Position(line=start.line, character=start.character),
                 end=Position(line=end.line, character=end.character))
