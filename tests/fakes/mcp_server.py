"""A scriptable MCP server for Margin's MCP client tests, on the mcp SDK's own server (MCPServer).

    python tests/fakes/mcp_server.py [--tools N] [--description-variant X] [--http PORT] [--exit-at-start]
                                     [--silent-at-start]

Serves over stdio by default. Its tools, always there:
    echo         {text: string} -> the text            readOnlyHint=true, openWorldHint=false
    add          {a, b: integer} -> the sum as text     (and structuredContent {"result": sum})
    hang         {} -> never answers (sleeps forever)
    die          {} -> the process exits with status 3 mid-call, without answering
    huge         {} -> a text result of 10 MiB
    write_note   {text: string} -> "noted"              destructiveHint=true
Options:
    --tools N                   N more tools tool_0 .. tool_{N-1} (a ~30-word description, an object of
                                two string properties; each returns its arguments), for a server that lists
                                hundreds of tools (the SDK's server sends them all on one page)
    --description-variant X     `echo`'s description mentions X: a server whose tool description changed
                                (default: $FAKE_MCP_VARIANT, so that it changes with the command line unchanged)
    --http PORT                 Streamable HTTP on http://127.0.0.1:PORT/mcp instead of stdio (PORT 0: a free
                                port); prints `listening http://127.0.0.1:PORT/mcp` on stdout once it accepts
                                (a port that is taken: exits 1)
    --exit-at-start             exits at once with status 2, after a line on stderr: a server that fails to start
    --silent-at-start           reads what it is sent and never answers: a server that never starts
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

HUGE_SIZE = 10 * 1024 * 1024
EXTRA_DESCRIPTION = ("Looks up the record named by `first` in the catalogue named by `second` and returns it as "
                     "stored, for tests of a client facing a server with very many tools.")


def build(tools: int = 0, description_variant: str | None = None) -> MCPServer:
    server = MCPServer("margin-fake-mcp", version="1.0.0")

    def echo(text: str) -> str:
        return text

    def add(a: int, b: int) -> int:
        return a + b

    async def hang() -> str:
        await anyio.sleep_forever()
        return "unreachable"

    def die() -> str:
        sys.stderr.write("fake MCP server: dying mid-call\n")
        sys.stderr.flush()
        os._exit(3)

    def huge() -> str:
        return "x" * HUGE_SIZE

    def write_note(text: str) -> str:
        return "noted"

    def extra(first: str, second: str) -> str:
        return f"{first} {second}"

    echo_description = "Returns the text it is given."
    if description_variant is not None:
        echo_description += f" Variant: {description_variant}."
    server.add_tool(echo, description=echo_description, structured_output=False,
                    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    server.add_tool(add, description="Adds two integers and returns the sum.")
    server.add_tool(hang, description="Never answers.", structured_output=False)
    server.add_tool(die, description="Makes the server process exit in the middle of the call.",
                    structured_output=False)
    server.add_tool(huge, description="Returns a text of 10 MiB.", structured_output=False)
    server.add_tool(write_note, description="Writes a note.", structured_output=False,
                    annotations=ToolAnnotations(destructive_hint=True))
    for index in range(tools):
        server.add_tool(extra, name=f"tool_{index}", description=f"Tool number {index}. {EXTRA_DESCRIPTION}",
                        structured_output=False)
    return server


async def serve_http(server: MCPServer, port: int) -> None:
    try:
        sock = socket.create_server(("127.0.0.1", port))
    except OSError as error:
        sys.exit(f"fake MCP server: cannot listen on 127.0.0.1:{port}: {error}")
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", access_log=False, lifespan="on")
    http = uvicorn.Server(config)
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    while not http.started and not serving.done():
        await asyncio.sleep(0.01)
    if http.started:
        print(f"listening http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    await serving


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=0, metavar="N")
    parser.add_argument("--description-variant", metavar="X", default=os.environ.get("FAKE_MCP_VARIANT"))
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--exit-at-start", action="store_true")
    parser.add_argument("--silent-at-start", action="store_true")
    args = parser.parse_args(argv)
    if args.silent_at_start:  # never answers the handshake: reads its input and says nothing
        for _ in sys.stdin:
            pass
        return
    if args.exit_at_start:
        sys.stderr.write("fake MCP server: failing to start (--exit-at-start)\n")
        sys.exit(2)
    server = build(args.tools, args.description_variant)
    if args.http is None:
        server.run("stdio")
    else:
        asyncio.run(serve_http(server, args.http))


if __name__ == "__main__":
    main()
