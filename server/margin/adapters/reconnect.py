"""One more try, on a fresh connection, for a request whose connection failed before any answer.

A model server closes a kept-alive connection after an idle spell (llama.cpp: 5 s) or under load,
and a request sent on it just then fails with no answer at all: httpx says the server
disconnected without sending a response, or the connection was reset or broken while sending.
The request never reached the server's handler, so sending it again is what every HTTP client
with a connection pool ends up doing (the OpenAI SDK retries these too). Only that case is tried
again, and only once: an answer that started (a status line, then a cut stream) is not, and a
server that keeps hanging up is reported as before (http_errors.transport_error)."""

from __future__ import annotations

import logging

import httpx

log = logging.getLogger(__name__)

NO_ANSWER = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
"""what a connection that failed before the response's status line raises from the transport"""


class ReconnectOnce(httpx.AsyncBaseTransport):
    """`inner` (by default httpx's own pooled transport), with a second try for a request whose
    connection failed before the response began. The pool drops the failed connection, so the
    second try goes out on another one."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self._inner.handle_async_request(request)
        except NO_ANSWER as error:
            if not isinstance(request.stream, httpx.ByteStream):
                raise  # a body that cannot be sent twice
            log.info("connection failed before an answer; sending again on a new one path=%s error=%s",
                     request.url.path, type(error).__name__)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
