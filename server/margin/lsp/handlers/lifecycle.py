"""The server's life: initialize (position encoding, initializationOptions kept for the settings
resolved right after the reply), initialized (settings problems told, features caught up with
the validated settings, settings pulled, tokenizers and probes warmed in the background),
settings changes, shutdown."""

from __future__ import annotations

import asyncio
import logging
import time

from lsprotocol import types

from margin import deferred
from margin.lsp.handlers.documents import watch_files
from margin.lsp.server import MarginLanguageServer

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
with deferred.imports():
    from margin.core import settings

log = logging.getLogger(__name__)


def initialize(ls: MarginLanguageServer, params: types.InitializeParams) -> None:
    started = time.perf_counter()
    encoding = ls.protocol.position_encoding
    ls.app.files.encoding = encoding
    options = params.initialization_options
    if isinstance(options, dict) and isinstance(options.get("margin"), dict):
        options = options["margin"]
    # Validated and applied right after the reply (MarginLanguageServer.resolve_settings), before
    # the next message: the reply itself reads only what it needs of them, unvalidated.
    ls.initialization_options = options
    for hook in ls.on_initialize:
        hook()
    ls.closer = asyncio.ensure_future(close_when_stopped(ls))
    log.info("initialize client=%s encoding=%s ms=%.1f",
             params.client_info.name if params.client_info else "unknown", encoding.value,
             (time.perf_counter() - started) * 1000)


async def close_when_stopped(ls: MarginLanguageServer) -> None:
    """Close the app when the connection ends without a shutdown request (the editor died, or
    quit without waiting): asyncio cancels this task as it stops, and the thread database's
    worker thread, left open, would keep the process alive."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await ls.app.aclose()
        raise


def initialized(ls: MarginLanguageServer, params: types.InitializedParams) -> None:
    ls.client_ready()
    # What `initialize` advertised came from a pre-read of the settings; validated since, they
    # may say otherwise (margin.core.settings_preread): each feature catches up as on a change.
    for hook in ls.on_settings_changed:
        hook()
    if ls.can("workspace.configuration"):
        ls.run_task(ls.pull_configuration(), "pull configuration")
    # Tokenizers build in a worker thread; the probe cache warms; neither delays anything.
    ls.app.preload_tokenizers()
    ls.run_task(ls.check_backends(), "probe backends")
    ls.services.retrieval.warm(ls.app.workspace.folders())  # the workspace index builds in the background
    watch_files(ls)


async def did_change_configuration(ls: MarginLanguageServer, params: types.DidChangeConfigurationParams) -> None:
    changed = params.settings
    if isinstance(changed, dict) and "margin" in changed:
        if changed["margin"] is not None:
            ls.apply_settings("workspace", settings.Source("workspace settings", changed["margin"], workspace=True))
    elif ls.can("workspace.configuration"):
        await ls.pull_configuration()


async def shutdown(ls: MarginLanguageServer, params: None) -> None:
    ls.cancel_background_tasks()
    ls.services.next_edit.stop()
    try:
        await ls.app.aclose()
    except asyncio.CancelledError:
        # The client quit without waiting for this reply (editors do) and the connection is
        # being torn down: there is no one left to answer.
        log.info("shutdown interrupted: the client has gone")


def register(server: MarginLanguageServer) -> None:
    server.feature(types.INITIALIZE)(initialize)
    server.feature(types.INITIALIZED)(initialized)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(types.SHUTDOWN)(shutdown)
