"""`margin`: Margin from a terminal, over the same services as the language server:
`margin doctor`, `margin chat`, `margin explain`, `margin edit`, `margin complete`,
`margin recall`, `margin threads`, the memories' `margin remember`, `margin forget` and
`margin memories` (in cli_memories.py), and `margin eval` (in cli_eval.py). The workspace is
the current folder; `--file` opens files as the editor would.

Settings come from a JSON file holding the same object as the editor's `margin` section
(`--settings FILE`, else $MARGIN_SETTINGS, else `settings.json` in Margin's user config
folder, when present), overlaid by MARGIN_<PROFILE>_<FIELD> environment variables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from margin import (
    __version__,
    cli_acp,
    cli_agent,
    cli_app,
    cli_eval,
    cli_explain,
    cli_mcp,
    cli_memories,
    cli_next_edit,
    logs,
    terminal_text,
)
from margin.cli_app import CliError, open_services, running_app
from margin.core.local_servers import PORTS_ENV
from margin.core.settings import PROFILES
from margin.core.where import Where
from margin.services.completion_routes import DESCRIPTIONS as ROUTE_DESCRIPTIONS
from margin.services.diagnosis import ProfileReport, diagnose
from margin.services.discovery import ports_to_search, render_search, search_if_needed
from margin.services.errors import RequestError
from margin.services.probe import Check, Probe, probe
from margin.services.turn import Ask


def _yes_no(value: bool | None, timed_out: bool = False) -> str:
    if value is None:
        return "not checked (profile disabled)"
    if timed_out:
        return ("yes, but busy (accepted the connection, gave no answer in time)" if value
                else "NO (timed out connecting)")
    return "yes" if value else "NO"


def render_report(reports: Sequence[ProfileReport], settings_from: str) -> str:
    lines = [f"Margin {__version__} doctor", f"settings: {settings_from}", ""]
    for r in reports:
        lines.append(f"{r.name}{'' if r.enabled else '  (disabled)'}")
        backend = f"{r.base_url}" + (f"  [{r.backend}]" if r.backend else "")
        rows = [
            ("backend", backend),
            ("reachable", _yes_no(r.reachable, r.timed_out)),
            ("model", r.model or "(the server's default)"),
            ("api key", r.api_key),
            ("context window", f"{r.context_window} tokens ({r.context_window_source})"),
            ("tokenizer", f"{r.tokenizer} ({'exact' if r.exact else 'approximate'}"
                          + (f"; {r.tokenizer_state}" if r.tokenizer_state.startswith("unavailable") else "")
                          + ")"),
        ]
        if r.completion_route:
            rows.append(("route", f"{r.completion_route}: {ROUTE_DESCRIPTIONS[r.completion_route]}"))
        if r.agent_protocol:
            rows.append(("actions", r.agent_protocol))
        if r.error:
            rows.append(("problem", r.error))
        lines.extend(f"  {label:<15} {value}" for label, value in rows)
        lines.append("")
    failing = [r for r in reports if r.enabled and (not r.reachable or r.error)]
    enabled = [r for r in reports if r.enabled]
    if failing:
        lines.append(f"{len(failing)} of {len(enabled)} enabled profiles have a problem: "
                     + ", ".join(r.name for r in failing))
    else:
        lines.append(f"All {len(enabled)} enabled profiles are ready.")
    return "\n".join(lines)


async def _doctor(args: argparse.Namespace) -> int:
    from margin.wiring import find_local_servers

    try:
        ports = ports_to_search(args.ports, os.environ)
    except ValueError as error:
        raise CliError(f"--ports / ${PORTS_ENV}: {error}") from None
    async with running_app(args) as (app, settings_from):
        reports = await diagnose(app.settings.current, app.backends, app.tokenizers,
                                 fresh=True, wait_for_tokenizers=True, routes=app.completion_routes)
        probes = await probe(app) if args.probe else None
        kept = app.probe_findings.path if probes else None
        if probes:
            app.probe_findings.save([found.finding() for found in probes if found.reachable])
    search = await search_if_needed(reports, find_local_servers, ports, always=args.scan)
    guarded = await _sandbox_said()
    if args.json:
        print(json.dumps({"version": __version__, "settingsFrom": settings_from,
                          "profiles": [r.as_dict() for r in reports], "sandbox": guarded,
                          "localServers": search.as_dict() if search else None,
                          **({"probes": [p.as_dict() for p in probes], "probesKept": str(kept)}
                             if probes is not None else {})}, indent=2))
    else:
        print(render_report(reports, settings_from))
        if probes is not None:
            print("\n" + "\n".join(render_probes(probes)))
            print(f"Kept in {kept}: the language server takes its completion route and tool use from it.")
        if search:
            print("\n" + "\n".join(render_search(search)))
        print(f"\n{guarded['describe']}")
    return 1 if any(r.enabled and (not r.reachable or r.error) for r in reports) else 0


async def _sandbox_said() -> dict[str, object]:
    """The protection model-written code runs under (margin.adapters.sandbox), for the doctor."""
    from margin.adapters import sandbox

    try:
        chosen = await asyncio.to_thread(sandbox.protection)
    except sandbox.SandboxError as error:
        return {"name": None, "kept": [], "describe": f"sandbox: {error}"}
    return {"name": chosen.name, "kept": sorted(chosen.kept), "describe": chosen.describe()}


def render_probes(probes: Sequence[Probe]) -> list[str]:
    """`margin doctor --probe`: what each backend's model did when tried."""
    lines = ["Tried on the model (--probe):"]
    for found in probes:
        model = found.model or "the server's model"
        lines.append(f"{', '.join(found.profiles)}: {found.base_url} · {model} · {found.seconds:.1f} s")
        rows: list[tuple[str, str]] = []
        for n, (route, check) in enumerate(found.routes.items()):
            rows.append(("fill in the middle" if n == 0 else "", f"{route}: {_check(check)}"))
        if found.routes:
            fallback = next((r for r, c in found.routes.items() if c.verdict != "refused"), "chat")
            rows.append(("completion route", found.fill_route or f"{fallback} (none filled the hole)"))
        rows += [("JSON schema", _check(found.json_schema)), ("tool calls", _check(found.tools)),
                 ("agent actions", _check(found.agent))]
        stream = _check(found.streaming)
        if found.first_token_s is not None:
            stream += f"; first token {found.first_token_s:.2f} s"
        if found.tokens_per_s is not None:
            stream += f", {found.tokens_per_s:.1f} tokens/s"
        rows += [("streaming", stream), ("context window", f"{found.context_window} tokens")]
        lines.extend(f"  {label:<19} {value}" for label, value in rows)
    return lines


def _check(check: Check | None) -> str:
    if check is None:
        return "not tried"
    return check.result + (f" ({check.seconds:.1f} s)" if check.seconds >= 0.05 else "")


async def _chat(args: argparse.Namespace) -> int:
    async with running_app(args) as (app, _):
        services, uris = open_services(app, args.file)
        where = Where(text_document=uris[0] if uris else None, thread_id=args.thread)
        try:
            if args.new:
                where = replace(where, thread_id=(await services.threads.new(where)).id)

            def show(text: str) -> None:
                sys.stdout.write(text)
                sys.stdout.flush()

            await services.retrieval.indexed(where.text_document)
            outcome = await services.chat.chat(Ask(cli_app.message(args), where, uris), on_delta=show)
        except RequestError as error:
            raise CliError(str(error)) from None
        if outcome.not_sent:
            print(f"margin: {outcome.not_sent}", file=sys.stderr)
            return 1
        print()
        print(f"[thread {outcome.thread_id} · {cli_explain.budget_line(outcome.budget)}]", file=sys.stderr)
        return 0


async def _edit(args: argparse.Namespace) -> int:
    """Propose an edit of FILE; print it as a unified diff; with --apply, write it if the file
    on disk is still exactly the text the model saw."""
    import difflib

    from margin.core.editops import apply_edits
    from margin.core.vfs import fingerprint

    async with running_app(args) as (app, _):
        services, uris = open_services(app, [args.file])
        ask = Ask(" ".join(args.instruction).strip() or cli_app.message(args), Where(text_document=uris[0]), uris)
        await services.retrieval.indexed(uris[0])
        outcome = await services.editops.propose(ask)
        if not outcome.ops:
            raise CliError(outcome.assistant_message or "the model proposed no change")
        print(outcome.assistant_message, file=sys.stderr)
        uri = uris[0]
        base = outcome.bases[uri]
        proposed = apply_edits(base.text, outcome.edits[uri])
        name = os.path.relpath(Path(args.file).resolve())
        sys.stdout.writelines(difflib.unified_diff(
            base.text.splitlines(keepends=True), proposed.splitlines(keepends=True),
            fromfile=f"a/{name}", tofile=f"b/{name}"))
        if not args.apply:
            return 0
        path = Path(args.file)
        on_disk = path.read_bytes().decode("utf-8")
        if fingerprint(on_disk) != outcome.base_fingerprints[uri]:
            raise CliError(f"{args.file} changed on disk since the model read it; nothing was written. Run again.")
        path.write_bytes(proposed.encode("utf-8"))
        print(f"wrote {args.file}", file=sys.stderr)
        return 0


def _line_col(value: str) -> tuple[int, int]:
    line, sep, col = value.partition(":")
    if not sep or not line.isdigit() or not col.isdigit() or int(line) < 1 or int(col) < 1:
        raise argparse.ArgumentTypeError(f"expected LINE:COL counted from 1, got {value!r}")
    return int(line), int(col)


async def _complete(args: argparse.Namespace) -> int:
    """The inline completion at FILE's LINE:COL (from 1, columns in characters): the suggestion
    on standard output, the route and the budget on standard error."""
    from margin.core.vfs import Position, PositionEncoding
    from margin.services.completion import CompletionRequest, CompletionService

    line, col = args.position
    async with running_app(args) as (app, _):
        _, uris = open_services(app, [args.file])
        app.files.encoding = PositionEncoding.UTF32  # columns in characters, as a person counts them
        outcome = await CompletionService(app).complete(CompletionRequest(uris[0], Position(line - 1, col - 1)))
        where = f"route {outcome.route or 'none'}" + (f" · {cli_explain.budget_line(outcome.budget)}" if outcome.budget else "")
        if outcome.suggestion is None:
            print(f"margin: no suggestion ({outcome.reason}) [{where}]", file=sys.stderr)
            return 1
        sys.stdout.write(outcome.suggestion.text + ("\n" if not outcome.suggestion.text.endswith("\n") else ""))
        replaces = f" · replaces {outcome.suggestion.replaces} characters after the cursor" \
            if outcome.suggestion.replaces else ""
        print(f"[{where}{replaces}]", file=sys.stderr)
        return 0


async def _threads(args: argparse.Namespace) -> int:
    import datetime

    async with running_app(args) as (app, _):
        services, _ = open_services(app, [])
        workspace = None if args.all else Path.cwd().as_uri()
        found = await services.threads.list_threads(workspace)
        if not found.threads:
            print("no threads" + ("" if args.all else f" for {workspace} (--all for every workspace)"))
        for thread in found.threads:
            when = datetime.datetime.fromtimestamp(thread.updated_at).strftime("%Y-%m-%d %H:%M")
            count = len((await services.threads.history(Where(thread_id=thread.id))).messages)
            title = f"  {thread.title}" if thread.title else ""
            print(f"{thread.id}  {when}  {count:>4} messages  {thread.workspace or '(no workspace)'}{title}")
        if not found.persistent:
            print(f"margin: {found.problem}", file=sys.stderr)
        return 0


async def _recall(args: argparse.Namespace) -> int:
    async with running_app(args) as (app, _):
        services, _ = open_services(app, [])
        try:
            found = await services.threads.recall(Where(thread_id=args.thread), " ".join(args.pointer))
        except RequestError as error:
            raise CliError(str(error)) from None
        sys.stdout.write(found.recalled.content + ("" if found.recalled.content.endswith("\n") else "\n"))
        if found.changed_since is not None:
            state = "has changed since" if found.changed_since else "is unchanged since"
            print(f"[{found.file_id} {state}; {found.recalled.fingerprint}]", file=sys.stderr)
        return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="margin", description="Margin from the terminal.")
    parser.add_argument("--version", action="version", version=f"margin {__version__}")
    parser.add_argument("--settings", metavar="FILE", help="JSON settings (the editor's `margin` section)")
    parser.add_argument("--log-level", default=None,
                        help="log level for stderr (default WARNING; also MARGIN_LOG_LEVEL, MARGIN_LOG_FILE)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor = commands.add_parser(
        "doctor", help="check every profile: backend reachable, context window, tokenizer"
    )
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    doctor.add_argument("--probe", action="store_true",
                        help="also try what each model can do: fill in the middle by each route, JSON schema, "
                             "tool calls, streaming speed (seconds a model on a local server)")
    doctor.add_argument("--scan", action="store_true",
                        help="search this machine for model servers even when the backends answer "
                             "(done anyway when one does not)")
    doctor.add_argument("--ports", metavar="PORTS", default=None,
                        help=f"the loopback ports to search, e.g. 8080,11434 (also ${PORTS_ENV}; "
                             "default: 8080 llama.cpp/llamafile/LocalAI, 11434 Ollama, 1234 LM Studio, "
                             "8000 vLLM, 1337 Jan)")
    doctor.set_defaults(run=_doctor)

    def chat_options(command: argparse.ArgumentParser) -> None:
        command.add_argument("message", nargs="*", help="what to ask (or pipe it on standard input)")
        command.add_argument("--file", "-f", action="append", default=[],
                             help="a file to include (repeat; the first is the active file)")
        command.add_argument("--thread", help="a thread id (default: the current folder's thread)")

    chat = commands.add_parser("chat", help="ask the chat profile; the reply streams to standard output")
    chat_options(chat)
    chat.add_argument("--new", action="store_true", help="start a new thread for this folder")
    chat.set_defaults(run=_chat)
    explain = commands.add_parser(
        "explain", help="show what would be sent, section by section, without calling a model")
    chat_options(explain)
    explain.add_argument("--profile", default="chat", choices=PROFILES)
    explain.add_argument("--messages", action="store_true", help="also print every message in full")
    explain.add_argument("--json", action="store_true", help="print budget and messages as JSON")
    explain.set_defaults(run=cli_explain.explain)
    edit = commands.add_parser("edit", help="propose an edit of FILE as a unified diff; --apply writes it")
    edit.add_argument("file", help="the file to change")
    edit.add_argument("instruction", nargs="*", help="what to change (or pipe it on standard input)")
    edit.add_argument("--apply", action="store_true",
                      help="write the change, if the file is still exactly what the model read")
    edit.set_defaults(run=_edit, message=[])
    complete = commands.add_parser("complete", help="the inline completion at FILE's LINE:COL")
    complete.add_argument("file", help="the file")
    complete.add_argument("position", type=_line_col, metavar="LINE:COL", help="the cursor, counted from 1")
    complete.set_defaults(run=_complete)
    recall = commands.add_parser("recall", help="print what a pointer such as [t42 parser.py] stood for")
    recall.add_argument("pointer", nargs="+", help="the pointer, e.g. t42 parser.py")
    recall.add_argument("--thread", help="a thread id (default: the current folder's thread)")
    recall.set_defaults(run=_recall)
    threads = commands.add_parser("threads", help="list the conversation threads of this folder")
    threads.add_argument("--all", action="store_true", help="every workspace's threads")
    threads.set_defaults(run=_threads)
    cli_memories.add_commands(commands)
    cli_eval.add_commands(commands)
    cli_next_edit.add_commands(commands)
    cli_agent.add_commands(commands)
    cli_acp.add_commands(commands)
    cli_mcp.add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    terminal_text.guard_terminal()  # a reply's escape sequences shown, never run by the terminal
    logs.configure(args.log_level or os.environ.get("MARGIN_LOG_LEVEL") or "WARNING")
    try:
        return asyncio.run(args.run(args))
    except CliError as error:
        print(f"margin: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
