"""The wire format of Margin's own requests: params validated from plain JSON and results
dumped to it, camelCase on the wire, each beside its core value. Handlers parse with these,
call a service, and dump with these; nothing else builds Margin's JSON."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from margin.core.budget import BudgetReport
from margin.core.editops import EditOp
from margin.core.llm import ChatMessage
from margin.core.pointers import parse_pointer
from margin.core.selection_edit import Diagnostic
from margin.core.settings import PROFILES
from margin.core.vfs import Position, Range
from margin.core.where import Where
from margin.services.chat import Ask
from margin.services.editops import ApplyRequest
from margin.services.selection_edit import SelectionEditRequest

Token = int | str


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    def dump(self) -> dict[str, Any]:
        """The JSON sent: camelCase, and only the fields that were given (optional ones absent)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    @classmethod
    def of(cls, value: Any) -> Any:
        """The wire form of a core value whose attributes have the fields' names."""
        return cls.model_validate(value, from_attributes=True)


# --- shared pieces ---------------------------------------------------------------------------

class PositionModel(_Wire):
    line: Annotated[int, Field(ge=0)]
    character: Annotated[int, Field(ge=0)]

    def core(self) -> Position:
        return Position(self.line, self.character)


class RangeModel(_Wire):
    start: PositionModel
    end: PositionModel

    def core(self) -> Range:
        return Range(self.start.core(), self.end.core())

    @classmethod
    def of(cls, r: Range) -> RangeModel:
        return cls(start=PositionModel(line=r.start.line, character=r.start.character),
                   end=PositionModel(line=r.end.line, character=r.end.character))


class DocumentModel(_Wire):
    uri: Annotated[str, Field(min_length=1)]


def _uri(document: DocumentModel | None) -> str | None:
    return document.uri if document else None


class TokenizerModel(_Wire):
    name: str
    exact: bool


class DroppedModel(_Wire):
    item: str
    reason: str


class SectionModel(_Wire):
    name: str
    tokens: int
    kept: int
    dropped: list[DroppedModel]


class BudgetModel(_Wire):
    """The budget report in every chat, edit-ops and explain result."""

    context_window: int
    reserved_output: int
    limit: int
    total: int
    tokenizer: TokenizerModel
    sections: list[SectionModel]
    counted: int

    @classmethod
    def of(cls, report: BudgetReport) -> BudgetModel:
        return cls(context_window=report.context_window, reserved_output=report.reserved_output,
                   limit=report.limit, total=report.total,
                   tokenizer=TokenizerModel(name=report.tokenizer, exact=report.exact),
                   sections=[SectionModel(name=s.name, tokens=s.tokens, kept=s.kept,
                                          dropped=[DroppedModel(item=d.item, reason=d.reason) for d in s.dropped])
                             for s in report.sections],
                   counted=report.counted)


class MessageModel(_Wire):
    role: str
    content: str


# --- chat and threads ------------------------------------------------------------------------

class ChatRequestParams(_Wire):
    message: Annotated[str, Field(min_length=1)]
    text_document: DocumentModel | None = None
    selection: RangeModel | None = None
    position: PositionModel | None = None
    files: list[str] | None = None
    thread_id: str | None = None
    partial_result_token: Token | None = None
    work_done_token: Token | None = None

    def core(self) -> Ask:
        return Ask(self.message, Where(_uri(self.text_document), self.selection.core() if self.selection else None,
                                       self.position.core() if self.position else None, self.thread_id),
                   self.files)


class ExplainParams(ChatRequestParams):
    profile: Literal[PROFILES] = "chat"  # type: ignore[valid-type]


class UsageModel(_Wire):
    prompt_tokens: int | None
    completion_tokens: int | None



class RecallMadeModel(_Wire):
    """A call of the recall tool in a chat turn."""

    pointer: str | None
    status: str
    """recalled, changed since, not found, not a pointer, over budget, over the limit"""
    tokens: int
    fingerprint: str | None = None


class ChatResult(_Wire):
    thread_id: str
    reply: str
    usage: UsageModel
    budget: BudgetModel
    message: str | None = None
    """why nothing was sent (over budget, or refused upstream as too large)"""
    recalls: list[RecallMadeModel] | None = None
    """the recall tool's calls, when the model made any"""


class ExplainResult(_Wire):
    thread_id: str
    budget: BudgetModel
    messages: list[MessageModel]
    message: str | None = None
    tools: list[str] | None = None
    """the tools the request would offer (`recall`, when a pointer is shown and the backend
    takes tools)"""

    @staticmethod
    def messages_of(messages: Sequence[ChatMessage]) -> list[MessageModel]:
        return [MessageModel(role=m.role, content=m.content) for m in messages]


class HistoryParams(_Wire):
    thread_id: str | None = None
    text_document: DocumentModel | None = None

    def where(self) -> Where:
        return Where(text_document=_uri(self.text_document), thread_id=self.thread_id)


class RecallParams(HistoryParams):
    pointer: Annotated[str, Field(min_length=1, max_length=1000)]
    """e.g. `[t42 parser.py]` (the brackets may be left out)"""

    @field_validator("pointer")
    @classmethod
    def _a_pointer(cls, value: str) -> str:
        if parse_pointer(value) is None:
            raise ValueError("not a pointer: it looks like [t42 parser.py] (a turn, then a file name, `ops` or `reply`)")
        return value


class RecallResult(_Wire):
    thread_id: str
    pointer: str
    content: str
    """exactly what the pointer stood for when it was shown"""
    file_id: str | None = None
    fingerprint: str | None = None
    """the file's sha256 at that turn"""
    changed_since: bool | None = None
    """for a file: whether it has changed since that turn"""


class HistoryMessageModel(_Wire):
    id: int
    role: str
    content: str
    created_at: float



class HistoryResult(_Wire):
    thread_id: str
    messages: list[HistoryMessageModel]


class ThreadsParams(_Wire):
    workspace: str | None = None


class ThreadModel(_Wire):
    id: str
    workspace: str
    context: str
    title: str | None
    created_at: float
    updated_at: float



class ThreadsResult(_Wire):
    threads: list[ThreadModel]
    persistent: bool


class NewThreadParams(_Wire):
    text_document: DocumentModel | None = None
    title: str | None = None

    def where(self) -> Where:
        return Where(text_document=_uri(self.text_document))


class NewThreadResult(_Wire):
    thread_id: str


class DeleteThreadParams(_Wire):
    thread_id: Annotated[str, Field(min_length=1)]


class DeleteThreadResult(_Wire):
    deleted: bool


# --- edit-ops --------------------------------------------------------------------------------

class OpModel(_Wire):
    """An op on the wire (camelCase, `targetFile` a URI). Values are checked by the op rules,
    which name the op."""

    op: str
    target_file: str
    target: str
    match: str | None = None
    content: str | None = None

    def core(self) -> EditOp:
        return EditOp(self.op, self.target_file, self.target, self.match, self.content)

    @classmethod
    def of(cls, op: EditOp) -> OpModel:
        optional = {k: v for k, v in (("match", op.match), ("content", op.content)) if v is not None}
        return cls(op=op.op, target_file=op.target_file, target=op.target, **optional)


class EditOpsResult(_Wire):
    enabled: bool
    assistant_message: str
    ops: list[OpModel]
    base_fingerprints: dict[str, str]
    budget: BudgetModel | dict[str, Any]
    """{} when nothing was budgeted (the profile is off, or the request could not start)"""
    thread_id: str | None
    edit: dict[str, Any] | None = None
    """the proposal as a versioned WorkspaceEdit (LSP JSON), when there is one"""


class ApplyOpsParams(_Wire):
    ops: list[OpModel]
    base_fingerprints: dict[str, str]
    selection: RangeModel | None = None
    position: PositionModel | None = None
    text_document: DocumentModel | None = None

    def core(self) -> ApplyRequest:
        where = Where(_uri(self.text_document), self.selection.core() if self.selection else None,
                      self.position.core() if self.position else None)
        return ApplyRequest([op.core() for op in self.ops], dict(self.base_fingerprints), where)


class ApplyOpsResult(_Wire):
    applied: bool
    rebased: bool
    stale_files: list[str]
    failure_reason: str | None = None


# --- code actions ----------------------------------------------------------------------------

class DiagnosticModel(_Wire):
    line: Annotated[int, Field(ge=0)]
    message: str
    source: str | None = None
    code: str | None = None
    end_line: Annotated[int, Field(ge=0)] | None = None

    def core(self) -> Diagnostic:
        return Diagnostic(self.line, self.message, self.source, self.code, self.end_line)



class SelectionEditData(_Wire):
    """What a Margin code action carries (`data`, or its command's argument) until it is
    resolved: the selection, the text it was offered on, and what to ask."""

    uri: Annotated[str, Field(min_length=1)]
    range: RangeModel
    kind: Literal["preset", "fix", "comment"]
    fingerprint: str | None = None
    instruction: str = ""
    diagnostics: list[DiagnosticModel] = []

    def core(self) -> SelectionEditRequest:
        return SelectionEditRequest(self.uri, self.range.core(), self.kind, self.instruction,
                                    [d.core() for d in self.diagnostics], self.fingerprint)


class EditSelectionResult(_Wire):
    applied: bool
    failure_reason: str | None = None
    pending: bool | None = None
    """true: the model was still working when the command answered; the edit is applied when
    it is done, and a failure then is shown to the user"""


# --- status ----------------------------------------------------------------------------------

class StatusParams(_Wire):
    refresh: bool = False
    """Probe the backends again instead of reusing a recent probe."""


class FileStatusModel(_Wire):
    uri: str
    version: int
    fingerprint: str
    language_id: str



class ProfileStatusModel(_Wire):
    enabled: bool
    model: str | None
    base_url: str
    api_key: str
    """whether requests carry the API key `apiKeyEnv` names, and why (or why not): "none
    configured", "$VAR is set; sent to https://host only", or what keeps it back"""
    reachable: bool | None
    """None for a disabled profile (not probed); true for a busy backend, with `error` saying so"""
    backend: str | None
    context_window: int
    context_window_source: str
    tokenizer: str
    exact: bool
    tokenizer_state: str
    error: str | None
    completion_route: str | None = None
    """the completion profile's route (infill, mistral_fim, completions_suffix, raw_fim, chat),
    once found; null for the other profiles"""



class StatusResult(_Wire):
    version: str
    position_encoding: str
    profiles: dict[str, ProfileStatusModel]
    files: list[FileStatusModel]
    background: list[str]
    """work running after its request was answered, e.g. `summary <threadId>`"""
