"""A JSON-RPC client that speaks to `margin-lsp` over stdio with plain JSON in and out: what the
server sends is kept exactly as it arrived (no pygls types in between), so tests can compare
the wire format itself. The editor's side of server→client requests is answered by `answers`."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from tests import log_secrets
from tests.conftest import clean_env

Answer = Callable[[dict[str, Any]], Any]


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error


class RawClient:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.notifications: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        self.answers: dict[str, Answer] = {
            "workspace/configuration": lambda params: [None for _ in params.get("items", [])],
            "window/workDoneProgress/create": lambda params: None,
            "client/registerCapability": lambda params: None,
            "workspace/applyEdit": lambda params: {"applied": True},
        }
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                line = await stream.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            assert length is not None
            message = json.loads(await stream.readexactly(length))
            if "method" in message and "id" in message:
                self.server_requests.append(message)
                asyncio.ensure_future(self._answer(message))
            elif "method" in message:
                self.notifications.append(message)
            else:
                future = self._pending.pop(message.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(message)

    async def _answer(self, message: dict[str, Any]) -> None:
        answer = self.answers.get(message["method"])
        if answer is None:
            self._send({"jsonrpc": "2.0", "id": message["id"],
                        "error": {"code": -32601, "message": f"no {message['method']} here"}})
            return
        try:
            result = answer(message.get("params") or {})
            if asyncio.iscoroutine(result):
                result = await result
        except RpcError as error:
            self._send({"jsonrpc": "2.0", "id": message["id"], "error": error.error})
            return
        self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def _send(self, message: dict[str, Any]) -> None:
        self.send_body(json.dumps(message).encode())

    def send_request(self, method: str, params: Any = None) -> tuple[int, asyncio.Future[Any]]:
        log_secrets.secret_params(params)
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        self._send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id, future

    async def message(self, method: str, params: Any = None, timeout: float = 120) -> dict[str, Any]:
        """The whole response message: {"result": ...} or {"error": ...}."""
        _, future = self.send_request(method, params)
        return await asyncio.wait_for(future, timeout)

    async def request(self, method: str, params: Any = None) -> Any:
        response = await self.message(method, params)
        if "error" in response:
            raise RpcError(response["error"])
        return response.get("result")

    def send_body(self, body: bytes, msg_id: Any = None) -> asyncio.Future[Any] | None:
        """A message body exactly as given (not necessarily JSON); the future of the response
        with `msg_id`, when one is awaited."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        if msg_id is None:
            return None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        return future

    def notify(self, method: str, params: Any = None) -> None:
        if method in ("textDocument/didOpen", "textDocument/didChange"):
            log_secrets.secret_params(params)
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def cancel(self, msg_id: int) -> None:
        self.notify("$/cancelRequest", {"id": msg_id})

    async def drain(self) -> None:
        """Wait until everything sent so far has been read by the server (it answers in order
        of arrival for synchronous handlers, so a cheap request is a barrier)."""
        await self.request("margin/status", {})


@contextlib.asynccontextmanager
async def raw_client(env: dict[str, str], *, capabilities: dict[str, Any], root_uri: str | None = None,
                     initialization_options: Any = None,
                     command: tuple[str, ...] = ("-m", "margin.lsp.main"),
                     program: str = sys.executable, configuration: Any = None) -> AsyncIterator[RawClient]:
    """`command`: the arguments `program` is run with, by default what Python runs (the server,
    or a script that runs it); an installed `margin-lsp` is a program run with no arguments.
    `configuration`: what the client answers `workspace/configuration` with (section margin)."""
    process = await asyncio.create_subprocess_exec(
        program, *command, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean_env(**env))
    stderr = log_secrets.collect(process.stderr, f"the stderr of margin-lsp {process.pid}", forward=False)
    client = RawClient(process)
    if configuration is not None:
        client.answers["workspace/configuration"] = lambda params: [configuration for _ in params.get("items", [])]
    try:
        client.init_result = await client.request("initialize", {
            "processId": None, "rootUri": root_uri, "capabilities": capabilities,
            "initializationOptions": initialization_options, "clientInfo": {"name": "raw"}})
        client.notify("initialized", {})
        yield client
        await client.request("shutdown")
        client.notify("exit")
        await asyncio.wait_for(process.wait(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        client._reader.cancel()
        await log_secrets.drain(stderr)
