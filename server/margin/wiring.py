"""The composition root: real adapters plugged into the services. The adapters (httpx,
aiosqlite, pathspec, git) are imported when first used, not when the app is built
(margin.deferred)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from margin import deferred
from margin.core.workspace_access import WorkspaceAccess
from margin.services import app as app_module
from margin.services.app import MarginApp

if TYPE_CHECKING:
    from margin.adapters.disk_index_store import DiskIndexStore
    from margin.adapters.git_cli import GitCommandHistory
    from margin.adapters.llama_tokens import ServerCounter
    from margin.adapters.local_files import LocalFolderFiles
    from margin.adapters.openai_http import OpenAICompatibleProvider, RequestObserver
    from margin.adapters.sqlite_store import SQLiteThreadStore
    from margin.core.agent.ports import Ran
    from margin.core.local_servers import FoundServer
    from margin.core.mcp.ports import McpSession
    from margin.core.mcp.spec import McpServer
    from margin.core.tokens.choice import TokenizerChoice

with deferred.imports():
    from margin.adapters import (
        agent_run,
        disk_index_store,
        git_cli,
        llama_tokens,
        local_files,
        openai_http,
        sqlite_store,
    )


def make_provider(base_url: str, timeout_s: float, api_key: str | None,
                  on_request: RequestObserver | None = None) -> OpenAICompatibleProvider:
    return openai_http.OpenAICompatibleProvider(base_url, timeout_s=timeout_s, api_key=api_key,
                                                on_request=on_request)


def make_server_counter(choice: TokenizerChoice, base_url: str, timeout_s: float,
                        api_key: str | None = None) -> ServerCounter:
    """The counter that asks the model server at `base_url` (llama.cpp, or vLLM for `choice.variant`)."""
    if choice.kind == "vllm":
        return llama_tokens.VllmCounter(base_url, model=choice.variant, timeout_s=timeout_s, api_key=api_key)
    return llama_tokens.LlamaCppCounter(base_url, timeout_s=timeout_s, api_key=api_key)


def make_store(path: Path) -> SQLiteThreadStore:
    from margin.services.thread_storage import default_database_path

    return sqlite_store.SQLiteThreadStore(path, own_folder=path == default_database_path())


def make_folder_files(root: Path) -> LocalFolderFiles:
    return local_files.LocalFolderFiles(root)


def make_git_history(root: Path) -> GitCommandHistory:
    return git_cli.GitCommandHistory(root)


def make_index_store(folder: str, directory: Path) -> DiskIndexStore:
    """A folder's retrieval index on disk, queried in place and shared by the folder's servers
    (for any size of folder: at 2,000 files a query costs what the index in memory's does)."""
    return disk_index_store.DiskIndexStore(folder, directory)


async def find_local_servers(ports: Sequence[int]) -> list[FoundServer]:
    """The model servers answering on `ports` of this machine (loopback only): for `margin
    doctor`, never the language server, so imported here rather than warmed up (margin.deferred)."""
    from margin.adapters import local_scan

    return await local_scan.find_local_servers(ports)


LOCAL_WORKSPACE = WorkspaceAccess(make_folder_files, make_git_history, make_index_store)
"""the workspace folders on the local disk, read directly and with the `git` program"""


class _Hands:
    """The agent's hands (adapters.agent_run), its module imported on first use."""

    async def run(self, command: str, folder: Path) -> Ran:
        return await agent_run.LocalHands().run(command, folder)

    async def write(self, path: Path, base: str | None, text: str) -> str | None:
        return await agent_run.LocalHands().write(path, base, text)


class _McpConnector:
    """The MCP client (adapters.mcp_client, on the optional `mcp` SDK), imported on first use; the
    servers' stderr in `mcp-logs` beside the thread database."""

    def __init__(self, app: MarginApp) -> None:
        self.app = app

    async def connect(self, name: str, server: McpServer, command: str | None, timeout_s: float) -> McpSession:
        from margin.adapters import mcp_client

        logs = self.app.database_path().parent / "mcp-logs"
        return await mcp_client.SdkConnector(logs).connect(name, server, command, timeout_s)


def mcp_missing() -> str | None:
    """None when the `mcp` extra is installed; else what to install."""
    import importlib.util

    return None if importlib.util.find_spec("mcp") is not None else app_module.MCP_EXTRA


def build_app(environ: Mapping[str, str] | None = None) -> MarginApp:
    app = MarginApp.create(make_provider, make_server_counter, make_store,
                           os.environ if environ is None else environ, LOCAL_WORKSPACE)
    app.hands = _Hands()
    app.mcp_connector = _McpConnector(app)
    app.mcp_missing = mcp_missing
    return app
