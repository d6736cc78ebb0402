"""How an agent turn reaches an ACP client (services/agent_turn.py `Door`).

- Each step is told as session/update: the step's exact prompt tokens against the served window
  (`usage_update`), the model's working text (`agent_thought_chunk`), each call as a `tool_call`
  when it starts and a `tool_call_update` when it is done (kind, status, locations; an edit's
  diff), what the model was told when its answer was refused (a thought), and the answer
  (`agent_message_chunk`).
- An edit or a command is asked with session/request_permission: the four option kinds, and
  the edit's diff. The core's deadline bounds the wait (agentConfirmTimeoutS): no answer is a
  no, and the tool call says so. "Reject always" refuses that exact call for the rest of the
  session without asking; "allow always" is remembered unless the session's approvals option is
  `ask`.
- Files: when the client holds them (it advertised fs.readTextFile and fs.writeTextFile) every
  read and write goes through it — its unsaved buffers — and the text is read again just
  before writing: an edit lands only on the exact text the model read. Otherwise the disk, with
  the same check (the `Hands` port's checked write).
- Commands run in Margin's sandbox on this machine, never in the client's terminal (which
  would run what the model wrote unsandboxed); the output is shown in the tool call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.helpers import (
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_user_message_text,
)
from acp.schema import (
    PermissionOption,
    RequestPermissionRequest,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
)

from margin.core.agent import steps as agent_steps
from margin.core.agent.tools import canonical
from margin.core.threads import Message
from margin.services.agent_turn import ClientFileError, Confirm, Decision, EditAnswer, ProposedEdit
from margin.services.app import MarginApp
from margin.services.threads import DISPLAY

if TYPE_CHECKING:
    from margin.acp.server import Peer
    from margin.acp.sessions import Session

log = logging.getLogger(__name__)

KINDS = {"read": "read", "list": "read", "search": "search", "recall": "read", "diagnostics": "read",
         "edit": "edit", "run": "execute"}
STATUS = {"done": "completed"}
"""a call's status as ACP tells it (any other — failed, refused, repeated — is `failed`)"""
OPTIONS = [PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
           PermissionOption(option_id="allow_always", name="Always allow this exact call", kind="allow_always"),
           PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
           PermissionOption(option_id="reject_always", name="Always reject this exact call", kind="reject_always")]
DECISIONS: dict[str, Decision] = {"allow_once": "accept", "allow_always": "always", "reject_once": "reject",
                                  "reject_always": "reject"}
NOT_FOUND = -32002
"""the error code of a client that has no such file (ACP's resource not found)"""


class ClientFiles:
    """The files as the ACP client holds them (fs/read_text_file)."""

    def __init__(self, peer: Peer, session_id: str) -> None:
        self.peer = peer
        self.session_id = session_id

    async def read(self, path: Path) -> str | None:
        try:
            return await self.peer.read_text_file(self.session_id, str(path))
        except RequestError as error:
            if error.code == NOT_FOUND:
                return None
            raise ClientFileError(f"the editor could not read it ({error.code})") from None


class AcpDoor:
    def __init__(self, app: MarginApp, peer: Peer, session: Session, client_files: bool) -> None:
        self.app = app
        self.peer = peer
        self.session = session
        self.files: ClientFiles | None = ClientFiles(peer, session.id) if client_files else None
        self.calls = 0
        self.current: tuple[str, str, dict[str, Any]] | None = None
        """the call running: its tool call id, tool and arguments"""
        self._last: asyncio.Task[None] | None = None

    def _path(self, relative: str) -> str:
        return str(self.session.cwd / relative)

    def _send(self, update: Any) -> None:
        """Send an update after the ones before it; `settled` waits for all (none may follow the
        prompt's answer)."""
        self._last = asyncio.ensure_future(self._sent(self._last, update))

    async def _sent(self, previous: asyncio.Task[None] | None, update: Any) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        try:
            await self.peer.update(self.session.id, update)
        except (ConnectionError, RuntimeError):
            log.info("acp update not sent: the connection is closed")

    async def settled(self) -> None:
        """Every update made so far, sent."""
        if self._last is not None:
            await asyncio.wait([self._last])

    def say(self, text: str) -> None:
        """A message of Margin's own to the person, in the agent's words' place."""
        self._send(update_agent_message_text(text))

    def show(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "step":
            self._send(UsageUpdate(session_update="usage_update", used=event["promptTokens"],
                                   size=max(event.get("window") or 0, event["promptTokens"])))
        elif kind == "text":
            self._send(update_agent_thought_text(event["delta"]))
        elif kind == "calling":
            self.calls += 1
            call_id = f"s{event['step']}c{self.calls}"
            self.current = (call_id, event["tool"], event["args"])
            self._send(ToolCallStart(session_update="tool_call", tool_call_id=call_id, title=_title(event),
                                     kind=KINDS.get(event["tool"], "other"), status="in_progress",  # type: ignore[arg-type]
                                     locations=self._locations(event["args"]), raw_input=event["args"]))
        elif kind == "call" and self.current is not None:
            call_id = self.current[0]
            said = " ".join(part for part in (event.get("pointer", ""), event.get("summary", "")) if part)
            self._send(ToolCallProgress(session_update="tool_call_update", tool_call_id=call_id,
                                        status=STATUS.get(event["status"], "failed"),  # type: ignore[arg-type]
                                        content=[tool_content(text_block(said))] if said else None))
            self.current = None
        elif kind == "told":
            self._send(update_agent_thought_text(f"\n(Margin told the model: {event['text']})\n"))
        elif kind == "final":
            self._send(update_agent_message_text(event["answer"]))

    def _locations(self, args: dict[str, Any], line: int | None = None) -> list[ToolCallLocation] | None:
        path = args.get("path")
        if not isinstance(path, str) or not path.strip():
            return None
        start = args.get("start") if line is None else line
        return [ToolCallLocation(path=self._path(path), line=max(0, start - 1) if isinstance(start, int) else None)]

    async def _permission(self, tool: str, args: dict[str, Any], title: str, content: list[Any],
                          locations: list[ToolCallLocation] | None) -> Decision:
        asked = (tool, canonical(args))
        if asked in self.session.never:
            return "reject"
        call_id = self.current[0] if self.current is not None else f"ask{self.calls}"
        request = RequestPermissionRequest(session_id=self.session.id, options=OPTIONS, tool_call=ToolCallUpdate(
            tool_call_id=call_id, title=title, kind=KINDS.get(tool, "other"), status="pending",  # type: ignore[arg-type]
            content=content, locations=locations, raw_input=args))
        await self.settled()  # the tool call is shown before it is asked about
        answer = await self.peer.request_permission(request)
        outcome = answer.outcome
        if getattr(outcome, "outcome", "") != "selected":
            return "reject"  # cancelled: the turn is ending
        option = str(getattr(outcome, "option_id", ""))
        if option == "reject_always":
            self.session.never.add(asked)
        decision = DECISIONS.get(option, "reject")
        return "accept" if decision == "always" and self.session.approvals == "ask" else decision

    async def confirm(self, asked: Confirm) -> Decision:
        if asked.message is not None:
            return await self._permission(asked.tool, asked.args or {}, asked.summary,
                                          [tool_content(text_block(asked.message))], None)
        command = asked.command or ""
        return await self._permission("run", {"command": command}, f"Run in the sandbox: {command}",
                                      [tool_content(text_block(f"$ {command}"))], None)

    async def apply(self, edit: ProposedEdit, ask: bool) -> EditAnswer:
        path = self._path(edit.path)
        diff = tool_diff_content(path, edit.text, edit.base)
        args = self.current[2] if self.current is not None else {"path": edit.path}
        locations = [ToolCallLocation(path=path, line=max(0, edit.start_line - 1))]
        if self.current is not None:  # every edit's diff is shown, asked about or not
            self._send(ToolCallProgress(session_update="tool_call_update", tool_call_id=self.current[0],
                                        content=[diff], locations=locations))
        decision: Decision = "accept"
        if ask:
            what = "Create" if edit.base is None else "Edit"
            decision = await self._permission("edit", args, f"{what} {edit.path}", [diff], locations)
            if decision not in ("accept", "always"):
                return EditAnswer(decision)
        return EditAnswer(decision, await self._write(Path(path), edit))

    async def _write(self, path: Path, edit: ProposedEdit) -> str | None:
        """Write the edit only over the text it was made on; None when written, else why not."""
        if self.files is None:
            hands = self.app.hands
            return "files cannot be written here." if hands is None else await hands.write(path, edit.base, edit.text)
        try:
            now = await self.files.read(path)
        except ClientFileError as error:
            return f"{error}."
        if now != edit.base:
            return ("the file changed in the editor since it was read." if now is not None and edit.base is not None
                    else "the file exists now." if now is not None else "the file is gone from the editor.")
        try:
            await self.peer.write_text_file(self.session.id, str(path), edit.text)
        except RequestError as error:
            return f"the editor did not write it ({error.code})."
        return None


def _title(event: dict[str, Any]) -> str:
    args = event["args"]
    main = next((str(args[key]) for key in ("path", "command", "query", "pointer") if key in args), "")
    return f"{event['tool']} {' '.join(main.split())[:120]}".strip()


def task_of(prompt: Sequence[Any]) -> str:
    """The task as one text: the text blocks, then each embedded text resource as an attachment
    and each resource link by its URI. An image or audio block is refused by name: the agent's
    models read text."""
    said: list[str] = []
    attached: list[str] = []
    for block in prompt:
        kind = getattr(block, "type", "")
        if kind == "text":
            said.append(block.text)
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is None:
                raise RequestError(-32602, f"The attached {resource.uri} is binary: the agent reads text only.")
            attached.append(f"Attached {resource.uri}:\n```\n{text}\n```")
        elif kind == "resource_link":
            attached.append(f"(The person points at {block.uri}.)")
        else:
            raise RequestError(-32602, f"A {kind or 'content'} block cannot be read: the agent's models read text only "
                                       "(the agent's promptCapabilities say so).")
    return "\n\n".join(part for part in ["\n".join(said).strip(), *attached] if part)


def replayed(timeline: Sequence[Message], cwd: Path) -> list[Any]:
    """A stored agent thread as the updates a client shows: each task as the person's message,
    each call's result as a completed tool call, each turn's end as the agent's message."""
    updates: list[Any] = []
    for message in timeline:
        meta = message.meta.get(agent_steps.AGENT)
        meta = meta if isinstance(meta, dict) else {}
        if message.role == "user":
            updates.append(update_user_message_text(str(message.meta.get(DISPLAY, message.content))))
        elif message.kind == agent_steps.RESULT:
            pointer = str(meta.get("pointer", ""))
            updates.append(ToolCallStart(session_update="tool_call", tool_call_id=f"m{message.id}",
                                         title=pointer.strip("[]") or "result", status="completed",
                                         content=[tool_content(text_block(message.content[:2000]))]))
        elif message.role == "assistant" and meta.get("final"):
            updates.append(update_agent_message_text(message.content))
    return updates
