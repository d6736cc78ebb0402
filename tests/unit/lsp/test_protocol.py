"""The protocol's log of each request: an expected failure (any JSON-RPC error a handler
raises) is one metadata line, a bug is logged at ERROR with its traceback, and both are
answered."""

from __future__ import annotations

import asyncio
import json
import logging

from margin.lsp.server import RequestFailed, create_server
from margin.wiring import build_app


class Writer:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    def write(self, data: bytes) -> None:
        self.sent.append(json.loads(data.split(b"\r\n\r\n", 1)[1]))

    def close(self) -> None:
        pass


async def answer(server, writer: Writer, method: str, msg_id: int) -> dict:
    server.protocol._handle_request(msg_id, method, {})
    for _ in range(200):
        found = [m for m in writer.sent if m.get("id") == msg_id]
        if found:
            return found[0]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no answer to {method}")


async def test_expected_failures_are_one_line_and_bugs_get_a_traceback(caplog, tmp_path):
    server = create_server(build_app({"MARGIN_DATABASE": str(tmp_path / "t.db")}))
    writer = Writer()
    server.protocol.set_writer(writer)

    @server.feature("margin/refuse")
    async def refuse(ls, params):
        raise RequestFailed("Margin is still answering the previous message in this thread.")

    @server.feature("margin/crash")
    async def crash(ls, params):
        raise ValueError("a bug")

    with caplog.at_level(logging.INFO, logger="margin.lsp.protocol"):
        refused = await answer(server, writer, "margin/refuse", 1)
        crashed = await answer(server, writer, "margin/crash", 2)
    assert refused["error"]["code"] == -32803 and "still answering" in refused["error"]["message"]
    assert crashed["error"]["code"] == -32603
    (expected,) = [r for r in caplog.records if "id=1" in r.getMessage()]
    assert expected.levelno == logging.WARNING and expected.exc_info is None
    assert expected.getMessage() == "request failed id=1 method=margin/refuse code=-32803 error=RequestFailed"
    (bug,) = [r for r in caplog.records if "id=2" in r.getMessage()]
    assert bug.levelno == logging.ERROR and bug.exc_info is not None and bug.exc_info[0] is ValueError
    assert server.protocol._methods == {}
    await server.app.aclose()
