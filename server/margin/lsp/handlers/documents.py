"""Document sync: the editor's open documents as Margin's virtual files (incremental changes,
in the negotiated position encoding)."""

from __future__ import annotations

import logging

from lsprotocol import types

from margin.core.vfs import SyncError
from margin.lsp import convert
from margin.lsp.server import MarginLanguageServer

log = logging.getLogger(__name__)


def did_open(ls: MarginLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    ls.app.files.open(doc.uri, doc.language_id, doc.version, doc.text)
    log.debug("open uri=%s version=%d chars=%d", doc.uri, doc.version, len(doc.text))


def did_change(ls: MarginLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    doc = params.text_document
    try:
        ls.app.files.change(doc.uri, doc.version, [convert.change(c) for c in params.content_changes])
    except SyncError as error:
        log.warning("change not applied uri=%s version=%d: %s", doc.uri, doc.version, error)


def did_close(ls: MarginLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.app.files.close(params.text_document.uri)


def register(server: MarginLanguageServer) -> None:
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
