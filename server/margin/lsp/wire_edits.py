"""The wire format of edit-ops and of Margin's code actions: margin/editOps, margin/applyOps and
the margin.applyOps command; a code action's `data` and the margin.editSelection command (see
lsp/wire.py for the rest of Margin's own requests)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from margin.core.editops import EditOp
from margin.core.selection_edit import Diagnostic
from margin.core.where import Where
from margin.lsp.wire import BudgetModel, DocumentModel, PositionModel, RangeModel, _uri, _Wire
from margin.services.editops import ApplyRequest
from margin.services.selection_edit import SelectionEditRequest

# --- edit-ops --------------------------------------------------------------------------------

class OpModel(_Wire):
    """An op on the wire (camelCase, `targetFile` a URI). Values are checked by the op rules,
    which name the op."""

    op: str
    """insert, replace or delete"""
    target_file: str
    """the file's URI"""
    target: str
    """document, selection, cursor, or match (the text in `match`)"""
    match: str | None = None
    """for target `match`: the exact text the op changes"""
    content: str | None = None
    """the new text (insert and replace)"""

    def core(self) -> EditOp:
        return EditOp(self.op, self.target_file, self.target, self.match, self.content)

    @classmethod
    def of(cls, op: EditOp) -> OpModel:
        optional = {k: v for k, v in (("match", op.match), ("content", op.content)) if v is not None}
        return cls(op=op.op, target_file=op.target_file, target=op.target, **optional)


class EditOpsResult(_Wire):
    enabled: bool
    """false when the chatOps profile is off"""
    assistant_message: str
    """the model's explanation, or why there are no ops"""
    ops: list[OpModel]
    """the proposed ops: send them back unchanged to apply them"""
    base_fingerprints: dict[str, str]
    """each file's sha256 (`sha256:…`) as the model saw it, by URI"""
    budget: BudgetModel | dict[str, Any]
    """{} when nothing was budgeted (the profile is off, or the request could not start)"""
    thread_id: str | None
    """the thread the turn was kept in (null when the request could not start)"""
    edit: dict[str, Any] | None = None
    """the proposal as a versioned WorkspaceEdit (LSP JSON), when there is one"""


class ApplyOpsParams(_Wire):
    ops: list[OpModel]
    """as margin/editOps proposed them"""
    base_fingerprints: dict[str, str]
    """as margin/editOps gave them"""
    selection: RangeModel | None = None
    """the selection the ops were asked for"""
    position: PositionModel | None = None
    """the cursor they were asked at"""
    text_document: DocumentModel | None = None
    """the document they were asked from"""

    def core(self) -> ApplyRequest:
        where = Where(_uri(self.text_document), self.selection.core() if self.selection else None,
                      self.position.core() if self.position else None)
        return ApplyRequest([op.core() for op in self.ops], dict(self.base_fingerprints), where)


class ApplyOpsResult(_Wire):
    applied: bool
    rebased: bool
    """the file had changed clear of the ops, and they were moved onto it exactly"""
    stale_files: list[str]
    """files that changed where the ops go since they were proposed"""
    failure_reason: str | None = None
    """why nothing was applied, for a person"""


# --- code actions ----------------------------------------------------------------------------

class DiagnosticModel(_Wire):
    line: Annotated[int, Field(ge=0)]
    """zero-based"""
    message: str
    source: str | None = None
    code: str | None = None
    end_line: Annotated[int, Field(ge=0)] | None = None
    """zero-based, inclusive"""

    def core(self) -> Diagnostic:
        return Diagnostic(self.line, self.message, self.source, self.code, self.end_line)



class SelectionEditData(_Wire):
    """What a Margin code action carries (`data`, or its command's argument) until it is
    resolved: the selection, the text it was offered on, and what to ask."""

    uri: Annotated[str, Field(min_length=1)]
    """the document"""
    range: RangeModel
    """the selection"""
    kind: Literal["preset", "fix", "comment"]
    """preset: one of Margin's preset instructions; fix: the diagnostics; comment: a
    `margin: ...` comment in the selection"""
    fingerprint: str | None = None
    """the document's sha256 when the action was offered"""
    instruction: str = ""
    """what to ask of the model"""
    diagnostics: list[DiagnosticModel] = []  # noqa: RUF012 - pydantic copies a field's default
    """for `fix`: the problems to fix"""

    def core(self) -> SelectionEditRequest:
        return SelectionEditRequest(self.uri, self.range.core(), self.kind, self.instruction,
                                    [d.core() for d in self.diagnostics], self.fingerprint)

    @classmethod
    def of(cls, request: SelectionEditRequest) -> SelectionEditData:
        """An offered action's request as its `data` (`diagnostics` only when it has some: a fix)."""
        data = cls(uri=request.uri, range=RangeModel.of(request.range), kind=request.kind,
                   fingerprint=request.fingerprint, instruction=request.instruction)
        if request.diagnostics:
            data.diagnostics = [DiagnosticModel.of(problem) for problem in request.diagnostics]
        return data


class EditSelectionResult(_Wire):
    applied: bool
    failure_reason: str | None = None
    """why the editor did not apply the edit, for a person"""
    pending: bool | None = None
    """true: the model was still working when the command answered; the edit is applied when
    it is done, and a failure then is shown to the user"""
