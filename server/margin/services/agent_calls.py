"""The agent's calls, each run for one turn (services/agent.py runs the loop): the reading tools
against the workspace (services/agent_reads.py), `recall` from the thread's steps, `diagnostics`
from what the editor reported, and the two that are confirmed first — `edit`, applied through the
door only onto the text the model read (core/agent/edits.py), and `run`, a plain command in the
sandbox (the `Hands` port)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import shlex
from collections.abc import Awaitable
from typing import Any
from urllib.parse import unquote

from margin.core.agent import steps as agent_steps
from margin.core.agent import tools as agent_tools
from margin.core.agent.actions import Call, check_args
from margin.core.agent.edits import Applied, Refused, fingerprint
from margin.core.agent.ports import Hands
from margin.core.mcp import tools as mcp_tools
from margin.services.agent_turn import Confirm, EditAnswer, ProposedEdit, Turn
from margin.services.app import MarginApp
from margin.services.mcp import McpHub
from margin.services.retrieval import Retrieval

log = logging.getLogger(__name__)


class AgentCalls:
    def __init__(self, app: MarginApp, retrieval: Retrieval | None, hands: Hands | None,
                 mcp: McpHub) -> None:
        self.app = app
        self.retrieval = retrieval
        self.hands = hands
        self.mcp = mcp
        self.diagnostics: dict[str, list[dict[str, Any]]] = {}
        """the problems the editor reports, by document URI (margin/diagnostics)"""

    async def call(self, turn: Turn, call: Call, number: int) -> tuple[str, str, bool]:
        """Run one call: (status, what the model is shown, whether a file changed)."""
        name, args = call.tool.name, call.args
        if call.tool.effect == "calls":
            return await self._mcp(turn, call)
        try:
            files = turn.door.files
            if files is not None and name in ("read", "edit"):  # the client's text, not the disk's
                problem = await turn.reads.fetch(args["path"], files)
                if problem is not None:
                    return "failed", problem, False
            if name == "read":
                shown = turn.reads.read(args["path"], args.get("start"), args.get("end"),
                                        max_chars=max(1000, turn.result_limit * 3),
                                        numbered=agent_tools.EDIT_LINES in turn.tools)
                if shown.ok and shown.path is not None and shown.current is not None:
                    turn.ledger.read(shown.path, shown.current, shown.start, shown.end)
                return ("done" if shown.ok else "failed"), shown.text, False
            if name == "list":
                shown = turn.reads.list(args["path"])
                return ("done" if shown.ok else "failed"), shown.text, False
            if name == "search":
                shown = await turn.reads.search(args["query"], self.retrieval)
                return ("done" if shown.ok else "failed"), shown.text, False
            if name == "recall":
                found = agent_steps.find(turn.entries, args["pointer"])
                if found is None:
                    return "failed", f"Nothing in this thread is {args['pointer']}: pointers look like [t3 read a.py].", False
                return "done", found.text, False
            if name == "diagnostics":
                return await self._diagnostics(turn, args["path"])
            if name == "edit":
                return await self._edit(turn, call)
            if name == "run":
                return await self._run(turn, call)
        except OSError as error:
            return "failed", f"{name} failed: {error.strerror or type(error).__name__}.", False
        return "failed", f"There is no tool {name!r}.", False

    async def _mcp(self, turn: Turn, call: Call) -> tuple[str, str, bool]:
        """One of the person's MCP tools, or the `mcp` meta-tool (search, describe, call)."""
        hub, tool, args = self.mcp, call.tool, call.args
        if tool.server == "":  # the meta-tool
            action = str(args.get("action", "")).strip().lower()
            tools = list(turn.mcp_tools.values())
            if action == "search":
                return "done", mcp_tools.search(tools, str(args.get("query", ""))), False
            target = turn.mcp_tools.get(str(args.get("tool", "")).strip())
            if action not in ("describe", "call"):
                return "failed", "mcp's action is search, describe or call.", False
            if target is None:
                return "failed", f"There is no MCP tool {args.get('tool', '')!r}: search for one first.", False
            if action == "describe":
                return "done", hub.describe(target), False
            try:
                given = json.loads(str(args.get("arguments") or "{}"))
            except ValueError:
                return "failed", f"mcp's arguments are a JSON object for {target.name}, as its description shows.", False
            taken, problem = check_args(target, given)
            if problem is not None:
                return "failed", problem, False
            tool, args = target, taken
        if not hub.auto_approved(tool) and turn.approvals.needs_asking(tool, args):
            shown = json.dumps(args, ensure_ascii=False)
            shown = shown if len(shown) <= 600 else shown[:600] + " …"
            asked = Confirm("mcp", f"call {tool.name}", message=(
                f"Margin's agent asks to call the MCP tool {tool.remote!r} of the server {tool.server!r} "
                f"(it runs outside the sandbox) with {shown}"), args={"tool": tool.name, "arguments": args})
            decision = await self._within_deadline(turn, turn.door.confirm(asked), "expired")
            if decision == "always":
                turn.approvals.approve_always(tool, args)
            elif decision != "accept":
                why = "The person did not answer in time" if decision == "expired" else "The person declined it"
                return "refused", f"{why}: {tool.name} was not called. Do something else, or finish.", False
        status, shown = await hub.call(tool, args)
        return status, shown, False

    async def _diagnostics(self, turn: Turn, path: str) -> tuple[str, str, bool]:
        """The problems the editor reports in the file now — marked `new` when they were not
        there the last time the model looked in this turn, and those gone named — else the
        output of the person's agentCheckCommand for it (asked and sandboxed like `run`)."""
        file_id = turn.reads.file_id(path)
        if not file_id:
            return "failed", f"{path} is not a file inside the workspace.", False
        found = self.diagnostics.get(unquote(f"{turn.reads.folder_uri}/{file_id}"))
        if found is None:
            check = self.app.settings.current.globals.agent_check_command
            if check:
                command = check.replace("{path}", shlex.quote(file_id))
                return await self._run(turn, Call(agent_tools.RUN, {"command": command}, "check"))
            return "done", f"No problems are known for {file_id}: the editor has reported none.", False
        lines = [f"{file_id}:{d.get('line', 0)}: {d.get('severity', 'problem')}: {d.get('message', '')}"
                 + (f" ({d['source']})" if d.get("source") else "") for d in found[:50]]
        before = turn.problems_seen.get(file_id)
        turn.problems_seen[file_id] = set(lines)
        if before is not None:
            gone = sorted(before - set(lines))
            lines = [("new: " if line not in before else "") + line for line in lines]
            lines += [f"gone: {line}" for line in gone]
        if not found:
            return "done", f"{file_id} has no problems reported." + ("\n" + "\n".join(lines) if lines else "") + "\n", False
        head = f"{len(found)} problem{'s' if len(found) > 1 else ''} in {file_id} now"
        return "done", f"{head}:\n" + "\n".join(lines) + "\n", False

    async def _edit(self, turn: Turn, call: Call) -> tuple[str, str, bool]:
        args = call.args
        if turn.ask.read_only:
            return "refused", "Edits are not allowed in this run (read-only): say what should change, then finish.", False
        current, problem = turn.reads.current_text(args["path"])
        missing = current is None and problem is not None and problem.startswith("There is no file")
        if current is None and not missing:
            return "failed", problem or f"{args['path']} cannot be edited.", False
        file_id = turn.reads.file_id(args["path"]) or args["path"]
        before = copy.deepcopy(turn.ledger.seen.get(file_id))
        if "start" in args:  # a small model's edit: whole lines by number
            made = turn.ledger.edit_lines(file_id, current, args["start"], args["end"], args["new"])
        else:
            made = turn.ledger.edit(file_id, current, args["old"], args["new"])
        if isinstance(made, Refused):
            return "refused", made.reason, False
        assert isinstance(made, Applied)
        proposed = ProposedEdit(file_id, f"{turn.reads.folder_uri}/{file_id}", current, made.text, made.start_line,
                                made.end_line)
        ask = turn.approvals.needs_asking(agent_tools.EDIT, args)
        answer = await self._within_deadline(turn, turn.door.apply(proposed, ask),
                                             EditAnswer("expired"))
        if answer.decision == "always":
            turn.approvals.approve_always(agent_tools.EDIT, args)
        if answer.decision in ("reject", "expired") or answer.failure:
            if before is None:
                turn.ledger.seen.pop(file_id, None)
            else:
                turn.ledger.seen[file_id] = before
            if answer.failure:
                return "failed", f"The edit was not applied: {answer.failure} Read {file_id} again.", False
            why = ("The person did not answer in time" if answer.decision == "expired" else "The person declined it")
            return "refused", f"{why}: the edit of {file_id} was not applied. Do something else, or finish.", False
        assert turn.outcome is not None
        turn.outcome.edits.append({"path": file_id, "startLine": made.start_line, "endLine": made.end_line})
        said = (f"Edited {file_id}: lines {made.start_line}-{made.end_line} are now the new text "
                f"(sha256:{fingerprint(made.text)[:12]}).")
        return "done", said, True

    async def _run(self, turn: Turn, call: Call) -> tuple[str, str, bool]:
        command = call.args["command"]
        if turn.ask.read_only:
            return "refused", "Commands are not allowed in this run (read-only).", False
        if self.hands is None or turn.root is None:
            return "failed", "Commands cannot run here: the workspace folder is not on this machine's disk.", False
        if turn.approvals.needs_asking(agent_tools.RUN, call.args):
            decision = await self._within_deadline(turn, turn.door.confirm(Confirm("run", f"run {command}", command=command)),
                                                   "expired")
            if decision == "always":
                turn.approvals.approve_always(agent_tools.RUN, call.args)
            elif decision != "accept":
                why = "The person did not answer in time" if decision == "expired" else "The person declined it"
                return "refused", f"{why}: {command!r} did not run. Do something else, or finish.", False
        ran = await self.hands.run(command, turn.root)
        unsaved = [f.uri.rsplit("/", 1)[-1] for f in self.app.files.files()
                   if f.uri.startswith(turn.reads.folder_uri + "/") and self._unsaved(turn, f.uri, f.text)]
        note = (f"(Unsaved in the editor, so the command saw them as saved: {', '.join(unsaved[:5])}.)\n"
                if unsaved else "")
        return ("done" if ran.ok else "failed"), note + ran.text, False

    def _unsaved(self, turn: Turn, uri: str, text: str) -> bool:
        if turn.root is None:
            return False
        path = turn.root / uri[len(turn.reads.folder_uri) + 1:]
        try:
            return path.read_bytes().decode("utf-8", errors="replace") != text
        except OSError:
            return False

    async def _within_deadline(self, turn: Turn, work: Awaitable[Any], expired: Any) -> Any:
        timeout = self.app.settings.current.globals.agent_confirm_timeout_s
        try:
            return await asyncio.wait_for(work, timeout)
        except TimeoutError:
            log.info("agent confirmation expired thread=%s after_s=%g", turn.thread.id, timeout)
            return expired

