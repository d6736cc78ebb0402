"""What an agent turn is made of, apart from the loop that runs it (services/agent.py) and the
calls it makes (services/agent_calls.py): what the person asks, how the turn reaches them (a
`Door`: the language server's, the terminal's), what it is asked to confirm, and what it reports."""

from __future__ import annotations

import difflib
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from typing import Protocol as TypingProtocol

from margin.core.agent.actions import Protocol
from margin.core.agent.approvals import Approvals
from margin.core.agent.edits import Ledger
from margin.core.agent.steps import Entry
from margin.core.agent.stuck import Watch
from margin.core.agent.tools import TOOLS, Tool
from margin.core.budget import BudgetReport
from margin.core.llm import ChatMessage, Usage
from margin.core.threads import Thread
from margin.core.where import Where
from margin.services.agent_reads import WorkspaceReads
from margin.services.profile import Profile

Decision = Literal["accept", "always", "reject", "expired"]
Stop = Literal["finished", "step cap", "stuck", "deadline", "over budget", "model failed", "rejected"]


@dataclass(frozen=True)
class AgentAsk:
    task: str
    where: Where
    read_only: bool = False
    """only the tools that read: an edit or a command is refused without asking (`margin agent --yes`)"""
    folder: str | None = None
    """the workspace folder to work in (ACP: the session's cwd); None: the active document's"""
    model: str | None = None
    """the model to ask instead of the agent profile's (ACP's model choice), on the same server"""


@dataclass(frozen=True)
class ProposedEdit:
    path: str
    """the file's path in the workspace folder"""
    uri: str
    base: str | None
    """the text the edit is made on (None: a new file)"""
    text: str
    """the file's text after it"""
    start_line: int
    end_line: int

    def diff(self) -> str:
        return "".join(difflib.unified_diff((self.base or "").splitlines(keepends=True), self.text.splitlines(keepends=True),
                                            fromfile=f"a/{self.path}" if self.base is not None else "/dev/null",
                                            tofile=f"b/{self.path}"))


@dataclass(frozen=True)
class Confirm:
    """What the person is asked: an edit (with its diff), a command, or (`message`) an MCP tool's
    call or an MCP server's first start."""

    tool: str
    summary: str
    """one line: `edit src/a.py (lines 3-5)`, `run pytest -q`"""
    edit: ProposedEdit | None = None
    command: str | None = None
    message: str | None = None
    """the whole question, for what is neither an edit nor a command"""
    args: dict[str, Any] | None = None
    """what an "always" approves, for `message` questions (ACP's reject-always remembers it)"""
    lasting: bool = False
    """"always" outlasts the thread (an MCP server's approval, kept until `margin mcp forget`)"""


@dataclass(frozen=True)
class EditAnswer:
    decision: Decision
    failure: str | None = None
    """accepted but not applied: why (the editor refused, the file changed)"""


class ClientFiles(TypingProtocol):
    """Files the client holds (ACP's fs/*): every read of a file goes through it, its unsaved
    buffers included, never mixed with the disk."""

    async def read(self, path: Path) -> str | None:
        """The file's text as the client holds it; None when there is no such file. Raises
        ClientFileError when the client cannot read it."""


class ClientFileError(Exception):
    """The client could not read or write a file: the message says why."""


class Door(TypingProtocol):
    """How an agent turn reaches the person and the files."""

    @property
    def files(self) -> ClientFiles | None:
        """The client's files, when it holds them; None: the editor's open documents, else the disk."""

    def show(self, event: dict[str, Any]) -> Awaitable[None] | None:
        """A step's progress: `{"kind": "step" | "text" | "call" | "told" | "final", ...}`."""

    async def confirm(self, asked: Confirm) -> Decision:
        """Ask the person (a command; an edit, for doors that ask apart from applying it)."""

    async def apply(self, edit: ProposedEdit, ask: bool) -> EditAnswer:
        """Apply an edit, asking first when `ask`; never over text other than `edit.base`."""


@dataclass
class StepReport:
    number: int
    calls: list[dict[str, Any]] = field(default_factory=list)
    """tool, args, status (done, failed, refused, rejected, repeated), pointer"""
    told: list[dict[str, str]] = field(default_factory=list)
    """rejections told to the model: kind, text"""
    prompt_tokens: int = 0
    """the step's prompt, counted exactly"""


@dataclass
class AgentOutcome:
    thread_id: str
    answer: str
    stopped: Stop
    why: str
    protocol: Protocol
    protocol_source: str
    steps: list[StepReport] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)
    """each applied edit: path, startLine, endLine"""
    usage: Usage = field(default_factory=Usage)
    window: int = 0
    limit: int = 0
    """the prompt's limit: the served window less the reply's reserve and the margin"""
    tools_tokens: int = 0
    """what offering the tools costs, counted in every step's prompt"""
    mcp_tokens: int = 0
    """of which the MCP tools' (or the `mcp` meta-tool's, when they would take too much)"""
    described: int = 0
    """answers that described a call instead of making one"""
    budget: BudgetReport | None = None
    """how the last step's prompt spent the window"""
    rejected: int = 0


@dataclass
class Turn:
    """One turn's state."""

    ask: AgentAsk
    thread: Thread
    profile: Profile
    protocol: Protocol
    reads: WorkspaceReads
    root: Path | None
    door: Door
    entries: list[Entry]
    approvals: Approvals
    deadline: float
    ledger: Ledger = field(default_factory=Ledger)
    watch: Watch = field(default_factory=Watch)
    outcome: AgentOutcome | None = None
    result_limit: int = 2000
    """tokens one result may take in the prompt"""
    model: str | None = None
    """the model's name (the step cap goes by its size)"""
    tools: tuple[Tool, ...] = TOOLS
    """the tools offered (a small model's `edit` replaces lines by number)"""
    task_text: str = ""
    """the task as the model reads it (where the person is, added)"""
    problems_seen: dict[str, set[str]] = field(default_factory=dict)
    """the problems each file had when the model last looked (diagnostics shows what changed)"""
    served_note: str = ""
    """what to do about a window the server will not exceed (said with an over-budget stop)"""
    grammar: bool = False
    """the server holds an answer to a JSON schema by a grammar, outside the prompt (llama.cpp, vLLM)"""
    mcp_tools: dict[str, Tool] = field(default_factory=dict)
    """the person's MCP tools this turn may call, by name (offered themselves, or through `mcp`)"""


@dataclass(frozen=True)
class AgentExplained:
    thread_id: str
    """the thread named, or "" (a new one would be made)"""
    messages: list[ChatMessage]
    budget: BudgetReport
    tools: list[str]
    protocol: Protocol
    over_budget: str | None = None


class NoDoor:
    """An explanation reaches no one."""

    files = None

    def show(self, event: dict[str, Any]) -> None:
        return None

    async def confirm(self, asked: Confirm) -> Decision:
        return "reject"

    async def apply(self, edit: ProposedEdit, ask: bool) -> EditAnswer:
        return EditAnswer("reject")


NO_DOOR = NoDoor()
