"""The ACP connection: JSON-RPC 2.0 over newline-delimited JSON on stdio, by the SDK's
`Connection`. The SDK's agent router takes the stable methods and the unstable session ones;
the methods it does not route (session/delete, nes/*, document/*) are Margin's own routes here.
An unknown notification is logged and ignored, never fatal; an unknown request is answered
"method not found".

`Peer` is the client as Margin calls it: session/update, session/request_permission and
fs/read_text_file / fs/write_text_file."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from acp import RequestError
from acp.agent.router import build_agent_router
from acp.connection import Connection
from acp.meta import CLIENT_METHODS
from acp.schema import (
    ReadTextFileRequest,
    ReadTextFileResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionNotification,
    WriteTextFileRequest,
    WriteTextFileResponse,
)
from acp.utils import notify_model, request_model, request_optional_model
from pydantic import BaseModel, ValidationError

log = logging.getLogger(__name__)

Route = Callable[[dict[str, Any]], Awaitable[Any]]


class Peer:
    """The client's methods, as the agent calls them."""

    def __init__(self) -> None:
        self.conn: Connection | None = None

    def _conn(self) -> Connection:
        assert self.conn is not None, "the connection is not open"
        return self.conn

    async def update(self, session_id: str, update: Any) -> None:
        await notify_model(self._conn(), CLIENT_METHODS["session_update"],
                           SessionNotification(session_id=session_id, update=update))

    async def request_permission(self, request: RequestPermissionRequest) -> RequestPermissionResponse:
        return await request_model(self._conn(), CLIENT_METHODS["session_request_permission"], request,
                                   RequestPermissionResponse)

    async def read_text_file(self, session_id: str, path: str) -> str:
        read = await request_model(self._conn(), CLIENT_METHODS["fs_read_text_file"],
                                   ReadTextFileRequest(session_id=session_id, path=path), ReadTextFileResponse)
        return read.content

    async def write_text_file(self, session_id: str, path: str, text: str) -> None:
        await request_optional_model(self._conn(), CLIENT_METHODS["fs_write_text_file"],
                                     WriteTextFileRequest(session_id=session_id, path=path, content=text),
                                     WriteTextFileResponse)


def handler(agent: Any, extra_requests: dict[str, Route],
            extra_notifications: dict[str, Route]) -> Callable[[str, Any, bool], Awaitable[Any]]:
    """The connection's method handler: Margin's own routes, then the SDK's agent router."""
    router = build_agent_router(agent, use_unstable_protocol=True)

    async def handle(method: str, params: Any, is_notification: bool) -> Any:
        routes = extra_notifications if is_notification else extra_requests
        route = routes.get(method)
        if route is None:
            if is_notification and method not in _SDK_NOTIFICATIONS:
                log.info("acp notification ignored method=%s", method[:80])
                return None
            return await router(method, params, is_notification)
        try:
            return await route(params if isinstance(params, dict) else {})
        except ValidationError as error:
            raise RequestError.invalid_params({"message": _first_problem(error)}) from None

    return handle


_SDK_NOTIFICATIONS = {"session/cancel"}


def _first_problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg", "invalid"))


def parsed(model: type[BaseModel], params: dict[str, Any]) -> Any:
    return model.model_validate(params)


async def serve(agent: Any, peer: Peer, extra_requests: dict[str, Route], extra_notifications: dict[str, Route],
                reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer the client until it closes the connection."""
    conn = Connection(handler(agent, extra_requests, extra_notifications), writer, reader, listening=False)
    peer.conn = conn
    try:
        await conn.main_loop()
    finally:
        await asyncio.shield(conn.close())
