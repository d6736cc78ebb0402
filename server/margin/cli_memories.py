"""`margin remember`, `margin forget` and `margin memories`: the user's memories from a terminal,
over the same service as the language server. The workspace is the current folder; `--file`
names a file whose workspace is meant (as the editor's active document would)."""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from margin.cli_app import CliError, open_services, running_app
from margin.core.memories import Memory
from margin.services.errors import RequestError


def _document(args: argparse.Namespace) -> str | None:
    return Path(args.file).resolve().as_uri() if args.file else None


def _text(args: argparse.Namespace) -> str:
    text = " ".join(args.text)
    if not text.strip() and not sys.stdin.isatty():
        text = sys.stdin.read()
    return text


def render(memory: Memory) -> str:
    """One memory as `margin memories` lists it: id, date, scope, then the text (its later lines
    indented under the first)."""
    when = datetime.datetime.fromtimestamp(memory.created).strftime("%Y-%m-%d %H:%M")
    head = f"{memory.id:>4}  {when}  {memory.scope:<9}  "
    return head + memory.text.replace("\n", "\n" + " " * len(head))


async def _remember(args: argparse.Namespace) -> int:
    async with running_app(args) as (app, _):
        service = open_services(app, [])[0].memories
        try:
            memory = await service.remember(_text(args), "global" if args.is_global else "workspace",
                                            _document(args))
        except RequestError as error:
            raise CliError(str(error)) from None
        if not service.persistent:  # said above, as it happened; a terminal command's memory ends with it
            print("margin: not remembered: the memory could not be saved", file=sys.stderr)
            return 1
        print(memory.id)
        where = "every workspace" if memory.scope == "global" else memory.workspace
        print(f"[remembered for {where}; `margin forget {memory.id}` forgets it]", file=sys.stderr)
        return 0


async def _forget(args: argparse.Namespace) -> int:
    async with running_app(args) as (app, _):
        service = open_services(app, [])[0].memories
        if not await service.forget(args.id):
            print(f"margin: there is no memory {args.id} (`margin memories` lists them)", file=sys.stderr)
            return 1
        print(f"forgot {args.id}")
        return 0


async def _memories(args: argparse.Namespace) -> int:
    async with running_app(args) as (app, _):
        services, _ = open_services(app, [])
        service = services.memories
        document = _document(args)
        found = await service.memories(document)
        if not found:
            folder = app.workspace.folder_of(document)
            print(f"no memories for {folder or 'this folder'} (add one: margin remember \"we use pytest\")")
        for memory in found:
            print(render(memory))
        return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    """The memory commands, on `margin`'s subcommands."""
    remember = commands.add_parser("remember", help="pin a fact for Margin to keep in mind in this folder")
    remember.add_argument("text", nargs="*", help="the fact (or pipe it on standard input)")
    remember.add_argument("--global", dest="is_global", action="store_true",
                          help="for every workspace, not only this folder")
    remember.add_argument("--file", "-f", help="a file whose workspace folder is meant (default: this folder)")
    remember.set_defaults(run=_remember)
    forget = commands.add_parser("forget", help="forget a memory by its id (see margin memories)")
    forget.add_argument("id", help="the memory's id")
    forget.set_defaults(run=_forget)
    memories = commands.add_parser("memories", help="list the memories of this folder and the global ones")
    memories.add_argument("--file", "-f", help="a file whose workspace folder is meant (default: this folder)")
    memories.set_defaults(run=_memories)
