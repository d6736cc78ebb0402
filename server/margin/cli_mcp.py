"""`margin mcp list`, `margin mcp approve NAME` and `margin mcp forget NAME`: the person's MCP
servers from a terminal — what each runs, whether it is approved (and what changed since), its
tools — over the same hub as the agent (services/mcp.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from margin.cli_app import CliError, open_services, running_app
from margin.core.mcp import spec
from margin.services.mcp_approvals import Approved, told_ignored


async def _list(args: argparse.Namespace) -> int:
    async with running_app(args) as (app, _):
        services, _ = open_services(app, [])
        hub = services.mcp
        await hub.offered(None)  # the approved ones started, to list their tools; nothing unapproved runs
        status = hub.status([Path.cwd()])
        if not status["servers"]:
            print("no MCP servers: add them to mcpServers in your settings (docs/mcp.md)")
        approvals = hub.file.load()
        for entry in status["servers"]:
            server, _origin = hub.configured()[entry["name"]]
            what = spec.describe(server, spec.resolve(server.command, server.env) if server.command else None)
            pinned = approvals.get(entry["name"])
            tools = f"; {len(pinned.tools)} tools pinned" if pinned and pinned.tools else ""
            detail = f" ({entry['detail']})" if entry["detail"] else ""
            print(f"{entry['name']}  {entry['state']}{detail}{tools}\n    {what}")
        if status["ignored"]:
            print(told_ignored(status["ignored"]), file=sys.stderr)
        missing = app.mcp_missing()
        if status["servers"] and missing:
            print(f"margin: {missing}", file=sys.stderr)
        return 0


async def _approve(args: argparse.Namespace) -> int:
    async with running_app(args) as (app, _):
        services, _ = open_services(app, [])
        hub = services.mcp
        configured = hub.configured()
        if args.name not in configured:
            names = ", ".join(configured) or "none"
            raise CliError(f"there is no MCP server {args.name!r} in your settings (configured: {names})")
        server, _origin = configured[args.name]
        executable = spec.resolve(server.command, server.env) if server.command else None
        if server.command and executable is None:
            raise CliError(f"{server.command!r} is not found on PATH: nothing to approve")
        identity = spec.identity(server, executable)
        before = hub.file.get(args.name)
        print(f"{args.name}: {spec.describe(server, executable)}")
        if before is not None and before.hash == spec.digest(identity):
            print("approved already; its tools are pinned again as it lists them now")
        elif before is not None:
            print("changed since approved: " + "; ".join(spec.changes(before.identity, identity)))
        if not args.yes:
            if not sys.stdin.isatty():
                raise CliError("approve in a terminal, or with --yes once you have read the command above")
            if input("Approve? It runs with your rights, outside the sandbox. [y/N] ").strip().lower() not in ("y", "yes"):
                print("not approved")
                return 1
        hub.file.put(args.name, Approved(identity, spec.digest(identity)))
        await hub.offered(None)
        state = hub.states.get(args.name)
        if state is None or state.state != "running":
            print(f"approved, but it did not start: {state.detail if state else 'unknown'}", file=sys.stderr)
            return 1
        print(f"approved; {len(state.tools)} tools pinned: " + ", ".join(t.name for t in state.tools[:30])
              + (" …" if len(state.tools) > 30 else ""))
        return 0


async def _forget(args: argparse.Namespace) -> int:
    async with running_app(args) as (app, _):
        services, _ = open_services(app, [])
        if not services.mcp.file.forget(args.name):
            print(f"margin: {args.name!r} was not approved", file=sys.stderr)
            return 1
        print(f"forgot the approval of {args.name}: it is asked again before it next runs")
        return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    mcp = commands.add_parser("mcp", help="the MCP servers the agent may use: list, approve, forget")
    actions = mcp.add_subparsers(dest="mcp_action")
    listing = actions.add_parser("list", help="each server, what it runs, whether it is approved, its tools")
    listing.set_defaults(run=_list)
    approve = actions.add_parser("approve", help="approve a server: its command, program and tools as they are now")
    approve.add_argument("name")
    approve.add_argument("--yes", action="store_true", help="do not ask (you have read what it runs)")
    approve.set_defaults(run=_approve)
    forget = actions.add_parser("forget", help="forget a server's approval: asked again before it next runs")
    forget.add_argument("name")
    forget.set_defaults(run=_forget)
    mcp.set_defaults(run=_list)
