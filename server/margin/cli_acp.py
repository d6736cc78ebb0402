"""`margin acp`: Margin's agent for editors that speak the Agent Client Protocol (Zed, JetBrains,
Neovim's CodeCompanion, Emacs's agent-shell), on standard input and output; the editor starts
it. Logs go to standard error (metadata only). docs/acp.md says what it supports."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from acp.stdio import stdio_streams

from margin.cli_app import CliError, running_app
from margin.services.registry import Services

STDIO_LIMIT = 50 << 20
"""the longest message read (a prompt with embedded files)"""


class _NoLibraryDetails(logging.Filter):
    """The ACP library logs its failures with the exception's text, which can quote what the
    client sent (a prompt, a file): keep the record, with only the exception's type."""

    def filter(self, record: logging.LogRecord) -> bool:
        if f"{os.sep}acp{os.sep}" in (record.pathname or "") and record.exc_info:
            kind = record.exc_info[0].__name__ if record.exc_info[0] is not None else "error"
            record.msg = f"{record.getMessage().split(' method=')[0]} ({kind})"
            record.args = None
            record.exc_info = record.exc_text = None
        return True


async def _acp(args: argparse.Namespace) -> int:
    from margin.acp.nes import NextEdits
    from margin.acp.server import Peer, serve
    from margin.acp.sessions import MarginAgent

    if sys.stdin is None or sys.stdout is None:
        raise CliError("margin acp talks on standard input and output: the editor starts it")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_NoLibraryDetails())
    async with running_app(args) as (app, _):
        app.tell_user = lambda message: print(f"margin: {message}", file=sys.stderr)
        services = Services.over(app)
        peer = Peer()
        agent = MarginAgent(services, peer)
        nes = NextEdits(services, agent.folders)
        reader, writer = await stdio_streams(limit=STDIO_LIMIT)
        requests: dict[str, Any] = {"session/delete": agent.delete_session, **nes.requests()}
        try:
            await serve(agent, peer, requests, nes.notifications(), reader, writer)
        finally:
            services.next_edit.stop()
    return 0


def add_commands(commands: Any) -> None:
    acp = commands.add_parser("acp", help="the agent over the Agent Client Protocol on standard input and output "
                                          "(Zed, JetBrains, CodeCompanion, agent-shell start it)")
    acp.set_defaults(run=_acp)

