"""The params of Margin's own requests, validated from plain JSON (camelCase on the wire)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from margin.core.settings import PROFILES
from margin.core.vfs import Position, Range
from margin.core.editops import EditOp
from margin.services.chat import ChatParams
from margin.core.selection_edit import Diagnostic
from margin.services.editops import ApplyRequest
from margin.services.selection_edit import SelectionEditRequest

Token = int | str


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class PositionModel(_Params):
    line: Annotated[int, Field(ge=0)]
    character: Annotated[int, Field(ge=0)]

    def core(self) -> Position:
        return Position(self.line, self.character)


class RangeModel(_Params):
    start: PositionModel
    end: PositionModel

    def core(self) -> Range:
        return Range(self.start.core(), self.end.core())


class DocumentModel(_Params):
    uri: Annotated[str, Field(min_length=1)]


class ChatRequestParams(_Params):
    message: Annotated[str, Field(min_length=1)]
    text_document: DocumentModel | None = None
    selection: RangeModel | None = None
    position: PositionModel | None = None
    files: list[str] | None = None
    thread_id: str | None = None
    partial_result_token: Token | None = None
    work_done_token: Token | None = None

    def core(self) -> ChatParams:
        return ChatParams(
            message=self.message,
            text_document=self.text_document.uri if self.text_document else None,
            selection=self.selection.core() if self.selection else None,
            position=self.position.core() if self.position else None,
            files=self.files,
            thread_id=self.thread_id,
        )


class ExplainParams(ChatRequestParams):
    profile: Literal[PROFILES] = "chat"  # type: ignore[valid-type]


class HistoryParams(_Params):
    thread_id: str | None = None
    text_document: DocumentModel | None = None


class ThreadsParams(_Params):
    workspace: str | None = None


class NewThreadParams(_Params):
    text_document: DocumentModel | None = None
    title: str | None = None


class DeleteThreadParams(_Params):
    thread_id: Annotated[str, Field(min_length=1)]


class OpModel(_Params):
    """An op on the wire (camelCase, `targetFile` a URI). Values are checked by the op rules,
    which name the op."""

    op: str
    target_file: str
    target: str
    match: str | None = None
    content: str | None = None

    def core(self) -> EditOp:
        return EditOp(self.op, self.target_file, self.target, self.match, self.content)

    @staticmethod
    def wire(op: EditOp) -> dict[str, str]:
        out = {"op": op.op, "targetFile": op.target_file, "target": op.target}
        if op.match is not None:
            out["match"] = op.match
        if op.content is not None:
            out["content"] = op.content
        return out


class ApplyOpsParams(_Params):
    ops: list[OpModel]
    base_fingerprints: dict[str, str]
    selection: RangeModel | None = None
    position: PositionModel | None = None
    text_document: DocumentModel | None = None

    def core(self) -> ApplyRequest:
        return ApplyRequest(
            ops=[op.core() for op in self.ops],
            base_fingerprints=dict(self.base_fingerprints),
            selection=self.selection.core() if self.selection else None,
            position=self.position.core() if self.position else None,
            text_document=self.text_document.uri if self.text_document else None,
        )


class DiagnosticModel(_Params):
    line: Annotated[int, Field(ge=0)]
    message: str
    source: str | None = None
    code: str | None = None
    end_line: Annotated[int, Field(ge=0)] | None = None

    def core(self) -> Diagnostic:
        return Diagnostic(self.line, self.message, self.source, self.code, self.end_line)

    @staticmethod
    def wire(diagnostic: Diagnostic) -> dict[str, Any]:
        return DiagnosticModel(line=diagnostic.line, message=diagnostic.message, source=diagnostic.source,
                               code=diagnostic.code, end_line=diagnostic.end_line).model_dump(by_alias=True)


class SelectionEditData(_Params):
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
