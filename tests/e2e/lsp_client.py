"""Drive the real `margin-lsp` process with pytest-lsp's client."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import JsonRPCResponseMessage, default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import register_lsp_features

from tests import log_secrets
from tests.conftest import clean_env

UTF16_CLIENT = types.ClientCapabilities(
    workspace=types.WorkspaceClientCapabilities(configuration=True),
)
UTF8_CLIENT = types.ClientCapabilities(
    general=types.GeneralClientCapabilities(
        position_encodings=[types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16]
    ),
    workspace=types.WorkspaceClientCapabilities(configuration=True),
)


def _converter() -> Any:
    converter = default_converter()
    # Results of Margin's own requests as plain JSON, not pygls' namedtuples.
    converter.register_structure_hook(JsonRPCResponseMessage, lambda obj, cls: cls(**obj))
    return converter


def _client() -> LanguageClient:
    # pytest-lsp's make_test_lsp_client, with the converter above, kept as `client.converter`
    # for tests that (un)structure LSP types themselves.
    made: list[Any] = []
    client = LanguageClient(converter_factory=lambda: made.append(_converter()) or made[-1])
    register_lsp_features(client)
    client.converter = made[-1]
    client.partials = {}  # partial results by token, in arrival order
    default_progress = client.protocol.fm.features[types.PROGRESS]

    def progress(params: types.ProgressParams) -> None:  # stored handlers have the client bound
        value = params.value
        if isinstance(value, dict) and "delta" in value:
            client.partials.setdefault(params.token, []).append(value["delta"])
        else:
            default_progress(params)

    client.protocol.fm.features[types.PROGRESS] = progress

    # Capabilities the server registers and unregisters, from the first (at `initialized`) on.
    client.registrations = []
    client.unregistrations = []
    for method in (types.CLIENT_REGISTER_CAPABILITY, types.CLIENT_UNREGISTER_CAPABILITY):
        client.protocol.fm.features.pop(method, None)

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    @client.feature(types.CLIENT_UNREGISTER_CAPABILITY)
    def unregister_capability(params: types.UnregistrationParams) -> None:
        client.unregistrations.extend(params.unregisterations)

    # workspace/applyEdit, which pytest-lsp's client does not answer by default: record the
    # edit, then apply it ("apply"), refuse it ("reject") or never answer ("hang").
    client.applied_edits = []
    client.apply_edit_mode = "apply"
    client.release_hang = asyncio.Event()

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    async def apply_edit(ls: LanguageClient, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        client.applied_edits.append(params)
        if client.apply_edit_mode == "hang":
            await client.release_hang.wait()  # until the test lets go (it must, before exit)
        if client.apply_edit_mode == "reject":
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="user said no")
        return types.ApplyWorkspaceEditResult(applied=True)

    return client


@contextlib.asynccontextmanager
async def margin_client(
    *,
    env: dict[str, str] | None = None,
    init_options: Any = None,
    capabilities: types.ClientCapabilities = UTF16_CLIENT,
    args: tuple[str, ...] = (),
    root: Path | None = None,
    folders: tuple[Path, ...] = (),
    shutdown: bool = True,
    configuration: dict[str, Any] | None = None,
    command: tuple[str, ...] = ("-m", "margin.lsp.main"),
) -> AsyncIterator[LanguageClient]:
    """`configuration` is what the client answers to workspace/configuration (section margin);
    `folders` are the workspace folders (sent as workspaceFolders, beside `root`); `command`
    is what Python runs (e.g. tests/e2e/sqlite_faults.py, the server with a fault injected)."""
    config = ClientServerConfig(
        server_command=[sys.executable, *command, *args],
        client_factory=_client,
        server_env=clean_env(**(env or {})),
    )
    client = await config.start()
    # Keep the server's stderr (its log) for tests.log_secrets: this reader replaces
    # pytest-lsp's forwarder (not yet run), and reads to the end, after stop().
    client._stderr_forwarder.cancel()
    client._stderr_forwarder = None
    stderr = log_secrets.collect(client._server.stderr, f"the stderr of margin-lsp {client._server.pid}")
    if "--log-file" in args:
        log_secrets.watch_file(args[args.index("--log-file") + 1])
    if configuration is not None:
        client.set_configuration(configuration, section="margin")
    exited = False
    try:
        client.init_result = await client.initialize_session(
            types.InitializeParams(
                capabilities=capabilities,
                initialization_options=init_options,
                root_uri=root.as_uri() if root else None,
                workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders] or None,
                client_info=types.ClientInfo(name="pytest-lsp"),
            )
        )
        yield client
        if shutdown:
            await client.shutdown_session()
            exited = True
    finally:
        # A failed test must not leave stop() waiting for a server that was never told to exit.
        if not exited and client._server is not None and client._server.returncode is None:
            client._server.kill()
        await client.stop()
        await log_secrets.drain(stderr)


async def request(client: LanguageClient, method: str, params: Any = None) -> Any:
    log_secrets.secret_params(params)
    return await client.protocol.send_request_async(method, params if params is not None else {})


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1, language: str = "python") -> None:
    log_secrets.secret(text)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id=language, version=version, text=text))
    )


def change_doc(client: LanguageClient, uri: str, version: int, *changes: tuple[tuple[int, int, int, int] | None, str]) -> None:
    events: list[Any] = []
    for span, text in changes:
        log_secrets.secret(text)
        if span is None:
            events.append(types.TextDocumentContentChangeWholeDocument(text=text))
        else:
            sl, sc, el, ec = span
            events.append(types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(sl, sc), types.Position(el, ec)), text=text))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=events,
    ))


def cancellable(client: LanguageClient, method: str, params: Any) -> tuple[asyncio.Future[Any], Any]:
    """Send a request; return its future and a function that sends $/cancelRequest for it
    (cancelling the future alone tells the server nothing)."""
    log_secrets.secret_params(params)
    msg_id = str(uuid.uuid4())
    future = asyncio.wrap_future(client.protocol.send_request(method, params, msg_id=msg_id))

    def cancel() -> None:
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))

    return future, cancel


def progress_token(client: LanguageClient, token: str) -> str:
    """A client-created work-done token, registered so the test client accepts its reports."""
    client.progress_reports.setdefault(token, [])
    return token


async def status(client: LanguageClient, **params: Any) -> dict[str, Any]:
    return await request(client, "margin/status", params)


async def file_status(client: LanguageClient, uri: str) -> dict[str, Any]:
    files = {f["uri"]: f for f in (await status(client))["files"]}
    return files[uri]
