"""Document sync: the editor's open documents as Margin's virtual files (incremental changes,
in the negotiated position encoding), and files changed on disk (workspace/didChangeWatchedFiles,
registered where the client allows it) for the retrieval index."""

from __future__ import annotations

import logging
import time

from lsprotocol import types

from margin import deferred, logs
from margin.core.vfs import SyncError
from margin.lsp.server import MarginLanguageServer

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
with deferred.imports():
    from margin.lsp import convert

log = logging.getLogger(__name__)


def _keeping_history(ls: MarginLanguageServer) -> bool:
    """The edit history is kept while next-edit suggestions are on (it costs nothing otherwise)."""
    return ls.app.settings.current.profile("nextEdit").enabled


def did_open(ls: MarginLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    # lsprotocol passes any JSON scalar through as the language id (it is a union with str).
    language = doc.language_id if isinstance(doc.language_id, str) else ""
    ls.app.files.open(doc.uri, language, doc.version, doc.text)
    if _keeping_history(ls):
        ls.services.next_edit.histories.opened(doc.uri, doc.text, doc.version)
    log.debug("open uri=%s version=%d chars=%d", logs.name(doc.uri), doc.version, len(doc.text))


def did_change(ls: MarginLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    doc = params.text_document
    try:
        file = ls.app.files.change(doc.uri, doc.version, [convert.change(c) for c in params.content_changes])
        if _keeping_history(ls):
            ls.services.next_edit.histories.changed(doc.uri, file.text, file.version, time.monotonic())
            ls.services.next_edit.typed(doc.uri, ls.app.settings.current.globals.next_edit_pause_ms / 1000)
        else:  # turned on again later, the history starts afresh rather than from a stale text
            ls.services.next_edit.closed(doc.uri)
    except SyncError as error:
        shown = logs.name(doc.uri)
        log.warning("change not applied uri=%s version=%d: %s", shown, doc.version,
                    str(error).replace(doc.uri, shown))


def did_close(ls: MarginLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.app.files.close(params.text_document.uri)
    ls.services.next_edit.closed(params.text_document.uri)
    ls.services.retrieval.touched(params.text_document.uri)  # indexed again from disk


def did_change_watched_files(ls: MarginLanguageServer, params: types.DidChangeWatchedFilesParams) -> None:
    for change in params.changes:  # created, changed or deleted on disk: indexed again
        ls.services.retrieval.touched(change.uri)


def watch_files(ls: MarginLanguageServer) -> None:
    """Ask the editor to report files changed on disk (git checkouts, other tools), where it can."""
    if ls.can("workspace.did_change_watched_files.dynamic_registration"):
        options = types.DidChangeWatchedFilesRegistrationOptions([types.FileSystemWatcher(glob_pattern="**/*")])
        ls.client_register_capability(types.RegistrationParams([types.Registration(
            "margin-watched-files", types.WORKSPACE_DID_CHANGE_WATCHED_FILES, options)]))


def register(server: MarginLanguageServer) -> None:
    server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(did_change_watched_files)
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
