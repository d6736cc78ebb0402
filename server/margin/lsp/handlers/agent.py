"""The agent's LSP door: margin/agent (each step streamed as partial results, cancellable), and
margin/diagnostics (the problems the editor shows, for the agent's `diagnostics` tool).

Confirmations reach any LSP client: an edit of an open document goes as `workspace/applyEdit`
on the version the model read, marked `needsConfirmation` where the client supports change
annotations (the editor shows it for review), else after `window/showMessageRequest` (Accept /
Always in this thread / Reject); a command is asked with `window/showMessageRequest`. The
agent's deadline (agentConfirmTimeoutS) bounds every one: no answer is a no. An edit of a file
that is not open is written to disk, only over the text the model read."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from margin import deferred
from margin.lsp.methods import AGENT, APPROVALS, DIAGNOSTICS
from margin.lsp.server import MarginLanguageServer, RequestFailed, answering_failures, parse_params
from margin.services.errors import RequestError

with deferred.imports():
    from margin.core import editops
    from margin.core.agent import tools as agent_tools
    from margin.lsp import convert, wire_agent
    from margin.services import agent as agent_service
    from margin.services import workspace

log = logging.getLogger(__name__)

ACCEPT, ALWAYS, REJECT = "Accept", "Always in this thread", "Reject"
KEEP = "Always (remembered)"
""""always" for what outlasts the thread: an MCP server's approval"""
DIFF_LINES = 40
"""lines of an edit's diff a message shows (the rest is counted)"""


class LspDoor:
    """The agent's door through a language client."""

    files = None

    def __init__(self, ls: MarginLanguageServer, token: Any) -> None:
        self.ls = ls
        self.token = token

    def show(self, event: dict[str, Any]) -> None:
        if self.token is not None and event["kind"] != "calling":  # a call is reported once it is done
            fields = {f.alias or name for name, f in wire_agent.AgentEvent.model_fields.items()}
            value = wire_agent.AgentEvent(**{k: v for k, v in event.items() if v is not None and k in fields}).dump()
            self.ls.progress(types.ProgressParams(token=self.token, value=value))

    async def _ask(self, message: str, always: str = ALWAYS) -> agent_service.Decision:
        try:
            answer = await self.ls.window_show_message_request_async(types.ShowMessageRequestParams(
                type=types.MessageType.Info, message=message,
                actions=[types.MessageActionItem(title=t) for t in (ACCEPT, always, REJECT)]))
        except JsonRpcException as error:  # the editor could not ask (eglot: a prompt already open): a no
            log.info("confirmation answered with an error code=%s: taken as a no", error.code)
            return "reject"
        title = answer.title if answer is not None else None
        return "accept" if title == ACCEPT else "always" if title == always else "reject"

    async def confirm(self, asked: agent_service.Confirm) -> agent_service.Decision:
        if asked.message is not None:
            return await self._ask(asked.message, KEEP if asked.lasting else ALWAYS)
        if asked.command is not None:
            return await self._ask(f"Margin's agent asks to run, in the sandbox: {asked.command}")
        assert asked.edit is not None
        return await self._ask(_edit_message(asked.edit))

    async def apply(self, edit: agent_service.ProposedEdit, ask: bool) -> agent_service.EditAnswer:
        ls = self.ls
        opened = ls.app.files.get(edit.uri)
        if opened is None:
            decision: agent_service.Decision = "accept"
            if ask:
                decision = await self._ask(_edit_message(edit))
                if decision not in ("accept", "always"):
                    return agent_service.EditAnswer(decision)
            path = workspace.path_of(edit.uri)
            hands = ls.app.hands
            if path is None or hands is None:
                return agent_service.EditAnswer(decision, "the file is not on this machine's disk.")
            failure = await hands.write(path, edit.base, edit.text)
            return agent_service.EditAnswer(decision, failure)
        if not ls.can("workspace.apply_edit"):
            return agent_service.EditAnswer("accept", f"{edit.path} is open in an editor that does not take edits "
                                            "from the server (workspace/applyEdit): close it, or make the change by hand.")
        if edit.base is None or opened.text != edit.base:
            return agent_service.EditAnswer("accept", f"{edit.path} changed in the editor since it was read.")
        annotate = ask and bool(ls.can("workspace.workspace_edit.change_annotation_support"))
        decision = "accept"
        if ask and not annotate:
            decision = await self._ask(_edit_message(edit))
            if decision not in ("accept", "always"):
                return agent_service.EditAnswer(decision)
            opened = ls.app.files.get(edit.uri)  # the person took their time: the text is checked again
            if opened is None or opened.text != edit.base:
                return agent_service.EditAnswer(decision, f"{edit.path} changed in the editor while you were asked.")
        prefix, suffix = _common(edit.base, edit.text)
        change = editops.OffsetEdit(prefix, len(edit.base) - suffix, edit.text[prefix:len(edit.text) - suffix], 0)
        workspace_edit = convert.workspace_edit({edit.uri: opened}, {edit.uri: [change]}, ls.app.files.encoding,
                                                confirm=annotate, label="Margin's agent",
                                                description=_edit_message(edit) if annotate else None)
        failure = await ls.apply_edit(workspace_edit, timeout=None, label="Margin's agent")
        if failure and annotate and failure.startswith("The editor refused"):
            now = ls.app.files.get(edit.uri)
            if now is not None and now.text != edit.base:
                return agent_service.EditAnswer("accept", f"{edit.path} changed in the editor: the edit was not applied.")
            return agent_service.EditAnswer("reject")
        if failure:
            return agent_service.EditAnswer(decision, failure)
        if not await _reflected(ls, edit):  # an editor may answer applied without applying (declined, or moved on)
            return agent_service.EditAnswer(decision, f"The editor answered that it applied the edit, but {edit.path} "
                                            "does not hold it: it was declined, or the document changed.")
        return agent_service.EditAnswer(decision)


def _edit_message(edit: agent_service.ProposedEdit) -> str:
    lines = edit.diff().splitlines()
    shown = "\n".join(lines[:DIFF_LINES]) + (f"\n… {len(lines) - DIFF_LINES} more lines" if len(lines) > DIFF_LINES else "")
    what = "create" if edit.base is None else f"edit lines {edit.start_line}-{edit.end_line} of"
    return f"Margin's agent asks to {what} {edit.path}:\n{shown}"


def _common(before: str, after: str) -> tuple[int, int]:
    """The lengths of the common start and the common end (not overlapping)."""
    limit = min(len(before), len(after))
    prefix = 0
    while prefix < limit and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and before[-1 - suffix] == after[-1 - suffix]:
        suffix += 1
    return prefix, suffix


async def _reflected(ls: MarginLanguageServer, edit: agent_service.ProposedEdit, wait_s: float = 5.0) -> bool:
    """Whether the editor's document holds the applied edit, once its didChange has arrived
    (waited for up to `wait_s`)."""
    until = time.monotonic() + wait_s
    while True:
        opened = ls.app.files.get(edit.uri)
        if opened is None or opened.text == edit.text:
            return True
        if time.monotonic() >= until:
            return False
        await asyncio.sleep(0.02)


async def agent(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(AGENT.params_model(), params, AGENT.name)
    door = LspDoor(ls, request.partial_result_token)
    ls.start_work(request.work_done_token, "Margin's agent is working")
    ending = "cancelled"
    try:
        outcome = await ls.services.agent.run(request.core(), door)
        ending = outcome.stopped
    except RequestError as error:
        ending = "failed"
        raise RequestFailed(str(error)) from None
    finally:
        ls.end_work(request.work_done_token, ending)
    return wire_agent.AgentResult.of(outcome).dump()


async def approvals(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(APPROVALS.params_model(), params, APPROVALS.name)
    revoke = [(a.tool, agent_tools.canonical(a.args)) for a in request.revoke]
    with answering_failures():
        always, patterns = await ls.services.agent.approved(request.thread_id, revoke)
    return wire_agent.ApprovalsResult(
        thread_id=request.thread_id, patterns=list(patterns),
        approvals=[wire_agent.ApprovalModel(tool=a.tool, args=json.loads(a.args)) for a in always]).dump()


async def diagnostics(ls: MarginLanguageServer, params: Any) -> None:
    try:
        request = parse_params(DIAGNOSTICS.params_model(), params, DIAGNOSTICS.name)
    except JsonRpcInvalidParams:  # a notification has no answer: a bad one is logged and left
        log.info("margin/diagnostics with bad params ignored")
        return
    ls.services.agent.problems_reported(request.uri, request.core())


def register(server: MarginLanguageServer) -> None:
    server.feature(AGENT.name)(agent)
    server.feature(APPROVALS.name)(approvals)
    server.feature(DIAGNOSTICS.name)(diagnostics)

