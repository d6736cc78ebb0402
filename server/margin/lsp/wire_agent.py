"""The agent's wire models: margin/agent's params, each step as a partial result, its result;
margin/diagnostics (the editor's problems, forwarded for the agent's `diagnostics` tool)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from margin.core.where import Where
from margin.lsp.wire import BudgetModel, DocumentModel, PositionModel, RangeModel, Token, UsageModel, _uri, _Wire
from margin.services.agent import AgentAsk, AgentOutcome


class AgentParams(_Wire):
    task: Annotated[str, Field(min_length=1)]
    """what the agent should do"""
    text_document: DocumentModel | None = None
    """the active document: its workspace folder is where the agent works"""
    selection: RangeModel | None = None
    """the selected range of the active document (named in the task)"""
    position: PositionModel | None = None
    thread_id: str | None = None
    """an agent thread to continue; without it, a new one"""
    read_only: bool = False
    """only the tools that read: edits and commands are refused without asking"""
    partial_result_token: Token | None = None
    """stream each step's events as partial results (`$/progress` with this token)"""
    work_done_token: Token | None = None
    """report work-done progress with this token (cancellable: the turn stops, its steps kept)"""

    def core(self) -> AgentAsk:
        return AgentAsk(self.task, Where(_uri(self.text_document), self.selection.core() if self.selection else None,
                                    self.position.core() if self.position else None, self.thread_id), self.read_only)


class AgentEvent(_Wire):
    """A partial result of margin/agent: one event of a step."""

    kind: Literal["step", "text", "call", "told", "final"]
    """step: a step begins; text: the model's words as they stream; call: a tool call and its
    status; told: what the model was told instead of a call (a rejection); final: the turn's end"""
    step: int | None = None
    delta: str | None = None
    """kind text: the next piece"""
    tool: str | None = None
    args: dict[str, Any] | None = None
    status: str | None = None
    """kind call: done, failed, refused (not allowed, declined, stale), repeated"""
    pointer: str | None = None
    """kind call: the pointer the result is kept under, e.g. `[t3 read a.py]`"""
    summary: str | None = None
    """kind call: the result's first line"""
    rejection: str | None = None
    """kind told: malformed, unknown tool, bad arguments, described, one at a time, empty"""
    text: str | None = None
    answer: str | None = None
    stopped: str | None = None
    prompt_tokens: int | None = None
    """kind step: the step's prompt, counted exactly"""


class AgentCallModel(_Wire):
    tool: str
    args: dict[str, Any]
    status: str
    pointer: str


class AgentToldModel(_Wire):
    kind: str
    text: str


class AgentStepModel(_Wire):
    number: int
    calls: list[AgentCallModel]
    told: list[AgentToldModel]
    prompt_tokens: int
    """the step's prompt, counted exactly; never more than `limit`"""


class AgentEditModel(_Wire):
    path: str
    start_line: int
    end_line: int


class AgentResult(_Wire):
    thread_id: str
    """the agent thread the steps are kept in"""
    answer: str
    """the final answer, or why the turn stopped"""
    stopped: Literal["finished", "step cap", "stuck", "deadline", "over budget", "model failed", "rejected"]
    why: str
    protocol: Literal["native", "json", "text"]
    """how the model acts: native tool calls, one JSON action per step, or actions in its text"""
    protocol_source: str
    steps: list[AgentStepModel]
    edits: list[AgentEditModel]
    """the edits applied, in order"""
    usage: UsageModel
    window: int
    """the context window the server serves"""
    limit: int
    """what a step's prompt may take"""
    tools_tokens: int
    """what offering the tools costs in every step's prompt"""
    described: int
    """answers that described a call instead of making one"""
    rejected: int
    """calls and answers told back to the model as rejected"""
    budget: BudgetModel | None = None
    """how the last step's prompt spent the window: system, tools, steps (the results shown as
    pointers, the steps left out), task"""

    @classmethod
    def of(cls, outcome: AgentOutcome) -> AgentResult:
        return cls(thread_id=outcome.thread_id, answer=outcome.answer, stopped=outcome.stopped, why=outcome.why,
                   protocol=outcome.protocol, protocol_source=outcome.protocol_source,
                   steps=[AgentStepModel(number=s.number, calls=[AgentCallModel(**c) for c in s.calls],
                                         told=[AgentToldModel(**t) for t in s.told], prompt_tokens=s.prompt_tokens)
                          for s in outcome.steps],
                   edits=[AgentEditModel(path=e["path"], start_line=e["startLine"], end_line=e["endLine"])
                          for e in outcome.edits],
                   usage=UsageModel.of(outcome.usage), window=outcome.window, limit=outcome.limit,
                   tools_tokens=outcome.tools_tokens, described=outcome.described, rejected=outcome.rejected,
                   budget=BudgetModel.of(outcome.budget) if outcome.budget is not None else None)


class ProblemModel(_Wire):
    range: RangeModel
    severity: Annotated[int, Field(ge=1, le=4)] = 1
    """LSP's: 1 error, 2 warning, 3 information, 4 hint"""
    message: str
    source: str | None = None


class DiagnosticsParams(_Wire):
    uri: Annotated[str, Field(min_length=1)]
    diagnostics: list[ProblemModel]
    """every problem the editor shows in the document now (an empty list: none)"""

    def core(self) -> list[dict[str, Any]]:
        names = {1: "error", 2: "warning", 3: "information", 4: "hint"}
        return [{"line": d.range.start.line + 1, "severity": names[d.severity], "message": d.message,
                 **({"source": d.source} if d.source else {})} for d in self.diagnostics]


class ApprovalModel(_Wire):
    tool: str
    """edit or run"""
    args: dict[str, Any]
    """exactly the arguments approved"""


class ApprovalsParams(_Wire):
    thread_id: Annotated[str, Field(min_length=1)]
    """the agent thread"""
    revoke: list[ApprovalModel] = Field(default_factory=list)
    """approvals to forget first"""


class ApprovalsResult(_Wire):
    thread_id: str
    approvals: list[ApprovalModel]
    """what the agent may do in this thread without asking ("Always in this thread"), until the
    server stops"""
    patterns: list[str]
    """the person's agentRunPatterns: commands that run without asking, in every thread"""


class NoResult(_Wire):
    """A notification has none."""
