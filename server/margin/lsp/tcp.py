"""Who may talk to `margin-lsp --tcp`. Whoever connects can do what an editor can: name the
workspace folders (whose files retrieval reads), and set the base URLs and the API keys'
variables that requests carry. So:

- the server listens on loopback only, unless `--allow-remote` is given (margin.lsp.main);
- every connection presents a token, on loopback too (any local process, and a web page's
  `fetch()`, can reach a loopback port): the one in `MARGIN_TCP_TOKEN` (`--allow-remote`
  requires it), else one made at start and written to a file only the user can read
  (`made_token`). A connection's first message must be `initialize` with
  `initializationOptions.tcpToken` equal to it, compared in constant time; the token is taken
  out of the options before the server reads them. A connection without it — or one that opens
  with an HTTP request line — is answered with an error and closed, and the server waits on;
- one editor at a time: a connection made while one is being served is closed at once.

A connection that has not shown its token may send one message of at most FIRST_MESSAGE_LIMIT
bytes within FIRST_MESSAGE_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TOKEN_ENV = "MARGIN_TCP_TOKEN"
MIN_TOKEN_LENGTH = 16
FIRST_MESSAGE_LIMIT = 1 << 20
FIRST_MESSAGE_TIMEOUT_S = 30.0
TOKEN_OPTION = "tcpToken"


class PrefixedReader:
    """A stream reader that first gives back `prefix` (a message already read), then the rest."""

    def __init__(self, prefix: bytes, reader: asyncio.StreamReader) -> None:
        self._prefix = prefix
        self._reader = reader

    async def readline(self) -> bytes:
        if self._prefix:
            line, newline, rest = self._prefix.partition(b"\n")
            self._prefix = rest
            return line + newline
        return await self._reader.readline()

    async def readexactly(self, n: int) -> bytes:
        taken, self._prefix = self._prefix[:n], self._prefix[n:]
        return taken + (await self._reader.readexactly(n - len(taken)) if len(taken) < n else b"")


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


_HTTP_REQUEST = re.compile(rb"^[A-Z]+ \S+ HTTP/\d")


def made_token(port: int, path: str | None) -> tuple[str, Path]:
    """A new token, written to `path` (default: `tcp-PORT.token` in Margin's runtime folder) made
    readable by the user alone before the token goes in; the token and where it is."""
    import secrets

    import platformdirs

    where = Path(path).expanduser() if path else Path(platformdirs.user_runtime_dir("margin")) / f"tcp-{port}.token"
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_hex(32)
    where.unlink(missing_ok=True)  # a file someone else made (and could read) is not reused
    fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(token + "\n")
    return token, where


async def _first_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The first message, if it is one JSON object within the limits (never an HTTP request: a
    web page's `fetch()` to the port)."""
    length = None
    for index in range(16):  # header lines
        line = await reader.readline()
        if index == 0 and _HTTP_REQUEST.match(line):
            return None
        if not line.strip():
            break
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == "content-length" and value.strip().isdigit():
            length = int(value.strip())
    if length is None or length > FIRST_MESSAGE_LIMIT:
        return None
    try:
        message = json.loads(await reader.readexactly(length))
    except (ValueError, asyncio.IncompleteReadError):
        return None
    return message if isinstance(message, dict) else None


def _token_of(message: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    """The token an `initialize` request presents, and its options as the server should read
    them (the token taken out)."""
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    if message.get("method") != "initialize" or not isinstance(options, dict):
        return None, None
    options = dict(options)
    token = options.pop(TOKEN_OPTION, None)
    wrapped = options.get("margin")
    if token is None and isinstance(wrapped, dict) and TOKEN_OPTION in wrapped:
        options["margin"] = {k: v for k, v in wrapped.items() if k != TOKEN_OPTION}
        token = wrapped[TOKEN_OPTION]
    return token, options


async def admit(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, token: str) -> PrefixedReader | None:
    """The connection's reader, its first message rewritten without the token, when that
    message is `initialize` with the right token; else None, the client answered and the
    connection closed."""
    try:
        message = await asyncio.wait_for(_first_message(reader), FIRST_MESSAGE_TIMEOUT_S)
    except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        message = None
    import hmac  # here, not at start-up: only a token-guarded connection needs it

    presented, options = _token_of(message or {})
    if isinstance(presented, str) and hmac.compare_digest(presented.encode(), token.encode()):
        assert message is not None and options is not None
        message["params"] = {**message["params"], "initializationOptions": options}
        return PrefixedReader(frame(message), reader)
    log.warning("tcp connection refused: %s", "no token" if presented is None else "wrong token")
    answer_id = message.get("id") if message and isinstance(message.get("id"), (int, str)) else None
    try:
        writer.write(frame({"jsonrpc": "2.0", "id": answer_id, "error": {"code": -32600, "message": (
            f"Margin refused this connection: its first message must be initialize with the token the "
            f"server was given ({TOKEN_ENV}) as initializationOptions.{TOKEN_OPTION}.")}}))
        await writer.drain()
    except OSError:
        pass
    writer.close()
    return None
