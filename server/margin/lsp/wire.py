"""The wire format of Margin's own requests: params validated from plain JSON and results
dumped to it, camelCase on the wire, each beside its core value. Handlers parse with these,
call a service, and dump with these; nothing else builds Margin's JSON. This module holds the
shared pieces, chat and threads; wire_edits, wire_memories, wire_status and wire_completion the
rest, and lsp/methods.py names each method's models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from margin.core.budget import BudgetReport
from margin.core.llm import ChatMessage
from margin.core.pointers import parse_pointer
from margin.core.settings import PROFILES
from margin.core.vfs import Position, Range
from margin.core.where import Where
from margin.services.turn import Ask

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
    """zero-based"""
    character: Annotated[int, Field(ge=0)]
    """zero-based, in the position encoding agreed at `initialize` (UTF-16 unless the client offered another)"""

    def core(self) -> Position:
        return Position(self.line, self.character)


class RangeModel(_Wire):
    start: PositionModel
    end: PositionModel
    """exclusive"""

    def core(self) -> Range:
        return Range(self.start.core(), self.end.core())

    @classmethod
    def of(cls, r: Range) -> RangeModel:
        return cls(start=PositionModel(line=r.start.line, character=r.start.character),
                   end=PositionModel(line=r.end.line, character=r.end.character))


class DocumentModel(_Wire):
    uri: Annotated[str, Field(min_length=1)]
    """the document's URI, as the editor names it"""


def _uri(document: DocumentModel | None) -> str | None:
    return document.uri if document else None


class TokenizerModel(_Wire):
    name: str
    """the tokenizer that counted, e.g. `tiktoken:o200k_base`, `llama.cpp`, `heuristic`"""
    exact: bool
    """false when counted with the heuristic (an upper bound)"""


class DroppedModel(_Wire):
    item: str
    """what was left out"""
    reason: str
    """why"""


class SectionModel(_Wire):
    name: str
    """the prompt's part: system, history, summary, snippets, files, memories, message, ..."""
    tokens: int
    """what the part takes"""
    kept: int
    """how many items were kept"""
    dropped: list[DroppedModel]
    """the items left out to fit the budget"""


class BudgetModel(_Wire):
    """The budget report in every chat, edit-ops and explain result."""

    context_window: int
    """the model's context window, in tokens"""
    reserved_output: int
    """tokens kept for the reply (`maxOutputTokens`)"""
    limit: int
    """what the prompt may take: the window less the reply's share and a safety margin"""
    total: int
    """the engine's sum of its sections"""
    tokenizer: TokenizerModel
    sections: list[SectionModel]
    counted: int
    """the final prompt counted whole by the tokenizer (0 when nothing is sent)"""

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
    """system, user, assistant or tool"""
    content: str
    """the message as sent"""


# --- chat and threads ------------------------------------------------------------------------

class ChatRequestParams(_Wire):
    message: Annotated[str, Field(min_length=1)]
    """what the user asks"""
    text_document: DocumentModel | None = None
    """the active document: its workspace folder picks the thread, and it comes first in the prompt"""
    selection: RangeModel | None = None
    """the selected range of the active document, shown to the model as the selection"""
    position: PositionModel | None = None
    """the cursor in the active document"""
    files: list[str] | None = None
    """the open documents the prompt may include, by URI; without it, every open document"""
    thread_id: str | None = None
    """the thread to continue; without it, the workspace folder's current thread"""
    partial_result_token: Token | None = None
    """stream the reply as partial results (`$/progress` with this token)"""
    work_done_token: Token | None = None
    """report work-done progress with this token (cancellable)"""

    def core(self) -> Ask:
        return Ask(self.message, Where(_uri(self.text_document), self.selection.core() if self.selection else None,
                                       self.position.core() if self.position else None, self.thread_id),
                   self.files)


class ExplainParams(ChatRequestParams):
    profile: Literal[PROFILES] = "chat"  # type: ignore[valid-type]
    """the profile whose prompt to explain (`agent`: the agent's next step for `message` as its
    task, in the thread named or a new one)"""


class ChatDelta(_Wire):
    """A partial result of margin/chat: `$/progress` on the request's partialResultToken."""

    delta: str
    """the reply's next piece of text"""


class UsageModel(_Wire):
    prompt_tokens: int | None
    """as the backend reported them; null when it did not"""
    completion_tokens: int | None
    """as the backend reported them; null when it did not"""



class RecallMadeModel(_Wire):
    """A call of the recall tool in a chat turn."""

    pointer: str | None
    """the pointer asked for; null when the call named none"""
    status: str
    """recalled, changed since, not found, not a pointer, over budget, over the limit"""
    tokens: int
    """what the recalled text took in the prompt"""
    fingerprint: str | None = None
    """the recalled file's sha256 at that turn"""


class ChatResult(_Wire):
    thread_id: str
    """the thread the turn was kept in"""
    reply: str
    """the whole reply (empty when nothing was sent)"""
    usage: UsageModel
    budget: BudgetModel
    message: str | None = None
    """why nothing was sent (over budget, or refused upstream as too large)"""
    recalls: list[RecallMadeModel] | None = None
    """the recall tool's calls, when the model made any"""


class ExplainResult(_Wire):
    thread_id: str
    """the thread the request would go to"""
    budget: BudgetModel
    messages: list[MessageModel]
    """the messages that would be sent, in order"""
    message: str | None = None
    """why nothing would be sent (over budget)"""
    tools: list[str] | None = None
    """the tools the request would offer (`recall`, when a pointer is shown and the backend
    takes tools; the agent's, for the agent profile)"""

    @staticmethod
    def messages_of(messages: Sequence[ChatMessage]) -> list[MessageModel]:
        return [MessageModel(role=m.role, content=m.content) for m in messages]


class HistoryParams(_Wire):
    thread_id: str | None = None
    """the thread; without it, the document's workspace folder's current thread"""
    text_document: DocumentModel | None = None
    """a document of the workspace folder whose current thread is meant"""

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
    """the pointer, as the thread's prompts write it"""
    content: str
    """exactly what the pointer stood for when it was shown"""
    file_id: str | None = None
    """the file's name in prompts, when the pointer is to a file"""
    fingerprint: str | None = None
    """the file's sha256 at that turn"""
    changed_since: bool | None = None
    """for a file: whether it has changed since that turn"""


class HistoryMessageModel(_Wire):
    id: int
    role: str
    """user or assistant"""
    content: str
    """what the user typed, or the reply"""
    created_at: float
    """epoch seconds"""



class HistoryResult(_Wire):
    thread_id: str
    messages: list[HistoryMessageModel]
    """oldest first"""


class ThreadsParams(_Wire):
    workspace: str | None = None
    """a workspace folder's URI; without it, every workspace's threads"""


class ThreadModel(_Wire):
    id: str
    workspace: str
    """the workspace folder's URI"""
    context: str
    """what the thread is for (`chat`)"""
    title: str | None
    created_at: float
    """epoch seconds"""
    updated_at: float
    """epoch seconds"""



class ThreadsResult(_Wire):
    threads: list[ThreadModel]
    persistent: bool
    """false when the thread database cannot be used and threads last until Margin stops"""


class NewThreadParams(_Wire):
    text_document: DocumentModel | None = None
    """a document of the workspace folder the thread is for"""
    title: str | None = None

    def where(self) -> Where:
        return Where(text_document=_uri(self.text_document))


class NewThreadResult(_Wire):
    thread_id: str


class DeleteThreadParams(_Wire):
    thread_id: Annotated[str, Field(min_length=1)]


class DeleteThreadResult(_Wire):
    deleted: bool
    """false when there was no such thread"""
