"""The server's life: initialize (position encoding, initializationOptions), initialized
(settings pulled, tokenizers and probes warmed in the background), settings changes, shutdown."""

from __future__ import annotations

import asyncio
import logging
import time

from lsprotocol import types

from margin.core.settings import Source
from margin.lsp.handlers.documents import watch_files
from margin.lsp.server import MarginLanguageServer

log = logging.getLogger(__name__)


def initialize(ls: MarginLanguageServer, params: types.InitializeParams) -> None:
    started = time.perf_counter()
    encoding = ls.protocol.position_encoding  # type: ignore[attr-defined]
    ls.app.files.encoding = encoding
    if ls.app.settings.startup_problems:
        ls.report_settings_problems(ls.app.settings.startup_problems, kept=False)
    options = params.initialization_options
    if isinstance(options, dict) and isinstance(options.get("margin"), dict):
        options = options["margin"]
    if options:
        ls.apply_settings("init", Source("initializationOptions", options))
    for hook in ls.on_initialize:
        hook()
    log.info("initialize client=%s encoding=%s ms=%.1f",
             params.client_info.name if params.client_info else "unknown", encoding.value,
             (time.perf_counter() - started) * 1000)


def initialized(ls: MarginLanguageServer, params: types.InitializedParams) -> None:
    ls.client_ready()
    if ls.can("workspace.configuration"):
        ls.run_task(ls.pull_configuration(), "pull configuration")
    # Tokenizers build in a worker thread; the probe cache warms; neither delays anything.
    ls.app.preload_tokenizers()
    ls.run_task(ls.check_backends(), "probe backends")
    ls.services.retrieval.warm(ls.app.workspace.folders())  # the workspace index builds in the background
    watch_files(ls)


async def did_change_configuration(ls: MarginLanguageServer, params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings
    if isinstance(settings, dict) and "margin" in settings:
        if settings["margin"] is not None:
            ls.apply_settings("workspace", Source("workspace settings", settings["margin"]))
    elif ls.can("workspace.configuration"):
        await ls.pull_configuration()


async def shutdown(ls: MarginLanguageServer, params: None) -> None:
    ls.cancel_background_tasks()
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
