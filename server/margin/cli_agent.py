"""`margin agent "task"`: the agent in the terminal, working in the current folder.

Each step is shown on standard error as it happens (the call, what became of it); the final
answer goes to standard output. An edit (its diff) or a command is asked at the terminal: yes,
always (this exact call, in this thread), or no. Without a terminal to ask at, every edit and
command is a no. `--yes` gives the agent only the tools that read: nothing is asked, and an
edit or a command is refused without asking — it never approves a change."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from margin.cli_app import CliError, open_services, running_app
from margin.core.where import Where
from margin.services.agent import AgentAsk, Confirm, Decision, EditAnswer, ProposedEdit
from margin.services.app import MarginApp
from margin.services.errors import RequestError

ANSWERS: dict[str, Decision] = {"y": "accept", "yes": "accept", "a": "always", "always": "always",
                                "n": "reject", "no": "reject", "": "reject"}


def _answer(prompt: str) -> str:
    """A line typed at the terminal, its prompt on standard error with the steps (`input()` would
    write it into the answer on standard output)."""
    print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line


class TerminalDoor:
    files = None

    def __init__(self, app: MarginApp, root: Path, interactive: bool) -> None:
        self.app = app
        self.root = root
        self.interactive = interactive

    def show(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "call":
            print(f"  step {event['step']} · {event['tool']} {_args(event['args'])} → {event['status']}",
                  file=sys.stderr, flush=True)
        elif kind == "told":
            print(f"  step {event['step']} · told the model: {event['rejection']}", file=sys.stderr, flush=True)

    async def _ask(self, question: str, always: str = "[a]lways in this thread") -> Decision:
        if not self.interactive:
            print(f"{question}\n  → no (no terminal to ask at)", file=sys.stderr, flush=True)
            return "reject"
        while True:
            print(question, file=sys.stderr, flush=True)
            try:
                answer = await asyncio.to_thread(_answer, f"Allow? [y]es / {always} / [n]o: ")
            except EOFError:
                return "reject"
            if answer.strip().lower() in ANSWERS:
                return ANSWERS[answer.strip().lower()]

    async def confirm(self, asked: Confirm) -> Decision:
        if asked.message is not None:
            return await self._ask(asked.message, "[a]lways (remembered)" if asked.lasting else "[a]lways in this thread")
        return await self._ask(f"The agent asks to run, in the sandbox: {asked.command or ''}")

    async def apply(self, edit: ProposedEdit, ask: bool) -> EditAnswer:
        decision: Decision = "accept"
        if ask:
            what = "create" if edit.base is None else "edit"
            decision = await self._ask(f"The agent asks to {what} {edit.path}:\n{edit.diff()}")
            if decision not in ("accept", "always"):
                return EditAnswer(decision)
        hands = self.app.hands
        if hands is None:
            return EditAnswer(decision, "files cannot be written here.")
        return EditAnswer(decision, await hands.write(self.root / edit.path, edit.base, edit.text))


def _args(args: dict[str, Any]) -> str:
    main = next((str(args[key]) for key in ("path", "command", "query", "pointer") if key in args), "")
    return " ".join(main.split())[:80]


async def _agent(args: argparse.Namespace) -> int:
    task = " ".join(args.task).strip()
    if not task and not sys.stdin.isatty():
        task = sys.stdin.read().strip()
    if not task:
        raise CliError('say what to do: margin agent "your task" (or pipe it on standard input)')
    async with running_app(args) as (app, _):
        services, _uris = open_services(app, [])
        root = Path.cwd()
        door = TerminalDoor(app, root, interactive=sys.stdin.isatty() and not args.yes)
        try:
            await services.retrieval.indexed(root.as_uri())
            outcome = await services.agent.run(AgentAsk(task, Where(text_document=None, thread_id=args.thread),
                                                        read_only=args.yes), door)
        except RequestError as error:
            raise CliError(str(error)) from None
        print(outcome.answer)
        edits = ", ".join(f"{e['path']}:{e['startLine']}-{e['endLine']}" for e in outcome.edits) or "none"
        print(f"[thread {outcome.thread_id} · {outcome.stopped} after {len(outcome.steps)} steps · edits: {edits} · "
              f"{outcome.protocol} actions · window {outcome.window}]", file=sys.stderr)
        return 0 if outcome.stopped == "finished" else 1


def add_commands(commands: Any) -> None:
    agent = commands.add_parser("agent", help="give the agent a task in this folder: it reads, searches, edits and "
                                              "runs commands in steps, asking before any edit or command")
    agent.add_argument("task", nargs="*", help="what to do (or pipe it on standard input)")
    agent.add_argument("--thread", help="an agent thread to continue (default: a new one)")
    agent.add_argument("--yes", action="store_true",
                       help="ask nothing: only the tools that read (edits and commands are refused, never approved)")
    agent.set_defaults(run=_agent)
