"""An editor for the agent's tests: pytest-lsp's client, answering what the agent asks the way
an editor does — `workspace/applyEdit` applied to its own copy of the document and followed by
`didChange` (as an editor's buffer changes), `window/showMessageRequest` answered by a chosen
button or never — and each turn's streamed events kept."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.e2e.lsp_client import open_doc


@dataclass
class Editor:
    client: LanguageClient
    docs: dict[str, tuple[int, str]] = field(default_factory=dict)
    """uri → (version, text): the editor's buffers"""
    answer: str | None = "Accept"
    """the button a confirmation gets (None: never answered)"""
    answers: list[str] = field(default_factory=list)
    """buttons for the next confirmations, in order, before `answer`"""
    asked: list[str] = field(default_factory=list)
    """the confirmations' messages, in order"""
    edits: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """by partial-result token"""
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def open(self, uri: str, text: str) -> None:
        self.docs[uri] = (1, text)
        open_doc(self.client, uri, text)

    def type(self, uri: str, text: str) -> None:
        """The person types: the buffer becomes `text`."""
        version, _ = self.docs[uri]
        self.docs[uri] = (version + 1, text)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    def text(self, uri: str) -> str:
        return self.docs[uri][1]


def attach(client: LanguageClient) -> Editor:
    editor = Editor(client)
    features = client.protocol.fm.features
    for method in (types.WORKSPACE_APPLY_EDIT, types.WINDOW_SHOW_MESSAGE_REQUEST):
        features.pop(method, None)
    plain_progress = features[types.PROGRESS]

    def progress(params: types.ProgressParams) -> None:
        value = params.value
        if isinstance(value, dict) and "kind" in value:
            editor.events.setdefault(str(params.token), []).append(value)
        else:
            plain_progress(params)

    features[types.PROGRESS] = progress

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    async def ask(ls: LanguageClient, params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        editor.asked.append(params.message)
        if editor.answers:
            return types.MessageActionItem(title=editor.answers.pop(0))
        if editor.answer is None:
            await editor.released.wait()
            return None
        return types.MessageActionItem(title=editor.answer)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    async def apply(ls: LanguageClient, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        editor.edits.append(params)
        for change in params.edit.document_changes or []:
            assert isinstance(change, types.TextDocumentEdit)
            uri = change.text_document.uri
            version, text = editor.docs[uri]
            if change.text_document.version != version:
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason="the document changed")
            for edit in sorted(change.edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
                start, end = _offset(text, edit.range.start), _offset(text, edit.range.end)
                text = text[:start] + edit.new_text + text[end:]
            editor.type(uri, text)
        return types.ApplyWorkspaceEditResult(applied=True)

    return editor


def _offset(text: str, position: types.Position) -> int:
    """An offset from a line and a character (the tests' texts are ASCII: UTF-16 units are characters)."""
    lines = text.splitlines(keepends=True)
    return sum(len(line) for line in lines[:position.line]) + position.character
