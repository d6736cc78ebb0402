"""The MCP client (core.mcp.ports) on the `mcp` SDK 2.x, an optional extra (`margin-lsp[mcp]`):
`Client(mode="auto")` speaks both the initialize handshake and the stateless 2026-07 servers,
over stdio (a command) or Streamable HTTP (a URL).

Each server's session lives in a task of its own that enters the SDK's client and leaves it (its
cancel scopes must be entered and left in one task); requests reach it through a queue. A
command runs exactly the executable that was approved, with only the variables the person gave
it over the SDK's minimal environment (never Margin's own, which may hold API keys); its stderr
goes to a file of the person's alone, named when it fails. Every wait has a deadline: a server
that never answers is a fault, the session closed, never a hang."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from margin.adapters import private_files
from margin.core.mcp.ports import ListedTool, McpFault, Started, ToolAnswer
from margin.core.mcp.spec import McpServer

MAX_TOOLS = 1000
"""tools taken from one server (a server listing more is said to)"""
MAX_PAGES = 50


def stderr_file(folder: Path, name: str) -> Path:
    """Where a server's stderr goes: Margin's own folder beside the thread database (yours alone)."""
    private_files.folder(folder, own=True)
    return folder / f"{name}.stderr"


def _text_of(result: Any) -> tuple[str, int]:
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4:,} bytes: not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            inner = block.resource
            text = getattr(inner, "text", None)
            parts.append(f"[resource {inner.uri}]\n{text}" if text is not None else f"[resource {inner.uri}: binary, not shown]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    return text, len(text)


CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001


class SdkSession:
    def __init__(self, name: str, server: McpServer, command: str | None, logs: Path) -> None:
        self.logs = logs
        self.name = name
        self.server = server
        self.command = command
        self.requests: asyncio.Queue[tuple[Callable[[Client], Awaitable[Any]], asyncio.Future[Any]] | None] = asyncio.Queue()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] | None = None
        self.errlog: IO[str] | None = None
        self.stderr_path: Path | None = None
        self.current: asyncio.Future[Any] | None = None
        """the answer the request in flight waits for"""

    async def _client(self, stack: contextlib.AsyncExitStack) -> Client:
        if self.server.url is not None:
            if not self.server.headers:
                return await stack.enter_async_context(Client(self.server.url, mode="auto", cache=None))
            http = await stack.enter_async_context(create_mcp_http_client(headers=dict(self.server.headers)))
            return await stack.enter_async_context(
                Client(streamable_http_client(self.server.url, http_client=http), mode="auto", cache=None))
        self.stderr_path = stderr_file(self.logs, self.name)
        fd = os.open(self.stderr_path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        self.errlog = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
        params = StdioServerParameters(command=self.command or "", args=list(self.server.args), env=dict(self.server.env))
        return await stack.enter_async_context(Client(stdio_client(params, errlog=self.errlog), mode="auto", cache=None))

    async def run(self) -> None:
        """Own the SDK's client from start to end: take requests until told to stop (None) or
        the connection is lost; then fail whatever still waits."""
        ended: BaseException = McpFault(f"the server stopped{self._messages()}")
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await self._client(stack)
                self.ready.set_result(None)
                while (item := await self.requests.get()) is not None:
                    work, answer = item
                    self.current = answer
                    try:
                        result = await work(client)
                    except Exception as error:  # noqa: BLE001 — boundary: told to the caller in words
                        self._settle(answer, error=error)
                        if isinstance(error, MCPError) and error.code == CONNECTION_CLOSED:
                            return
                    else:
                        self._settle(answer, result=result)
                    finally:
                        self.current = None
        except BaseException as error:  # the server's end, however it came (the SDK raises groups, or cancels)
            ended = error
            task = asyncio.current_task()
            if isinstance(error, asyncio.CancelledError) and task is not None and task.cancelling():
                raise  # Margin is stopping it
        finally:
            fault = McpFault(self._why(ended)) if not isinstance(ended, McpFault) else ended
            if not self.ready.done():
                self.ready.set_exception(fault)
            if self.current is not None:
                self._settle(self.current, error=McpFault(f"it stopped during the call{self._messages()}"))
            while not self.requests.empty():
                item = self.requests.get_nowait()
                if item is not None:
                    self._settle(item[1], error=fault)
            if self.errlog is not None:
                with contextlib.suppress(OSError):
                    self.errlog.close()

    @staticmethod
    def _settle(answer: asyncio.Future[Any], *, result: Any = None, error: BaseException | None = None) -> None:
        if answer.done():
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(result)

    def _messages(self) -> str:
        return f" (its messages: {self.stderr_path})" if self.stderr_path is not None else ""

    def _why(self, error: BaseException) -> str:
        while isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        said = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        if isinstance(error, MCPError):
            said = error.message[:200]
        if isinstance(error, (FileNotFoundError, PermissionError)):
            return f"it could not be started: {said}"
        if self.server.url is not None and "Connect" in type(error).__name__:
            return f"{self.server.url} could not be reached: {said}"
        if isinstance(error, asyncio.CancelledError):
            return f"its connection was lost{self._messages()}"
        return f"{said}{self._messages()}"

    async def _ask(self, work: Callable[[Client], Awaitable[Any]], timeout_s: float, what: str,
                   said_s: float | None = None) -> Any:
        if self.task is None or self.task.done():
            raise McpFault("the server is not running")
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self.requests.put((work, answer))
        try:
            return await asyncio.wait_for(asyncio.shield(answer), timeout_s)
        except TimeoutError:
            await self.close()
            raise McpFault(f"it did not answer {what} within {said_s or timeout_s:g} s") from None
        except McpFault:
            raise
        except MCPError as error:
            if error.code == REQUEST_TIMEOUT:
                raise McpFault(f"it did not answer {what} within {said_s or timeout_s:g} s") from None
            if error.code == CONNECTION_CLOSED:
                raise McpFault(f"it stopped during {what}{self._messages()}") from None
            raise McpFault(f"it answered {what} with an error: {error.message[:300]}") from None
        except Exception as error:  # noqa: BLE001 — the SDK's (an answer its own output schema refuses): in words
            raise McpFault(f"its answer to {what} could not be used: {str(error)[:300]}") from None

    async def tools(self) -> Started:
        async def listing(client: Client) -> Started:
            found: list[ListedTool] = []
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                for tool in page.tools:
                    notes = tool.annotations
                    found.append(ListedTool(tool.name, tool.description or "", dict(tool.input_schema or {}),
                                            bool(notes and notes.read_only_hint),
                                            not (notes is not None and notes.open_world_hint is False)))
                cursor = page.next_cursor
                if cursor is None or len(found) >= MAX_TOOLS:
                    break
            return Started(found[:MAX_TOOLS], len(found) > MAX_TOOLS or cursor is not None)

        return await self._ask(listing, 60.0, "the list of its tools")

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> ToolAnswer:
        async def calling(client: Client) -> ToolAnswer:
            result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout_s)
            text, size = _text_of(result)
            return ToolAnswer(text, bool(getattr(result, "is_error", False)), size)

        return await self._ask(calling, timeout_s + 2.0, f"the call of {tool}", timeout_s)

    async def close(self) -> None:
        task = self.task
        if task is None or task.done():
            return
        await self.requests.put(None)
        try:
            await asyncio.wait_for(asyncio.shield(task), 6.0)
        except (TimeoutError, Exception):  # noqa: BLE001 — a server that will not stop: its task is cancelled
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 6.0)


class SdkConnector:
    def __init__(self, logs: Path) -> None:
        self.logs = logs
        """the folder the servers' stderr goes to"""

    async def connect(self, name: str, server: McpServer, command: str | None, timeout_s: float) -> SdkSession:
        session = SdkSession(name, server, command, self.logs)
        session.task = asyncio.create_task(session.run(), name=f"mcp {name}")
        try:
            await asyncio.wait_for(asyncio.shield(session.ready), timeout_s)
        except TimeoutError:
            await session.close()
            raise McpFault(f"it did not start within {timeout_s:g} s{session._messages()}") from None
        except McpFault as fault:
            raise McpFault(f"it did not start: {fault}") from None
        return session
