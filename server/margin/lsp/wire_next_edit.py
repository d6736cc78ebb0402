"""The wire format of next-edit suggestions: Margin's `margin/nextEdit`, and the same answer as
`textDocument/copilotInlineEdit` in the shape the Copilot language server documents (so that
editors' existing next-edit interfaces show Margin's suggestions). Params are read leniently
(fields Margin does not use are ignored), as for inline completion."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from margin.lsp.wire import RangeModel, _Wire
from margin.lsp.wire_completion import StandardPosition, _Standard


class NextEditDocumentModel(_Standard):
    uri: Annotated[str, Field(min_length=1)]
    version: int
    """the version the cursor is in: an answer for an older one is empty"""


class NextEditParams(_Standard):
    text_document: NextEditDocumentModel
    position: StandardPosition


class NextEditModel(_Wire):
    range: RangeModel
    """what it replaces, in the document at `version`"""
    new_text: str


class NextEditResult(_Wire):
    edits: list[NextEditModel]
    """empty: nothing to suggest (`reason` says why)"""
    jump_to: StandardPosition | None = None
    """where the first edit starts: where Tab takes the cursor"""
    version: int
    """the document's version the edits are for"""
    reason: str | None = None
    """why there is no suggestion"""


class CopilotCommandModel(_Wire):
    title: str
    command: str
    arguments: list[str]


class CopilotDocumentModel(_Wire):
    uri: str
    version: int


class CopilotInlineEditModel(_Wire):
    text: str
    text_document: CopilotDocumentModel
    range: RangeModel
    command: CopilotCommandModel | None = None


class CopilotInlineEditResult(_Wire):
    edits: list[CopilotInlineEditModel]
    """alternatives for the one next edit (Margin gives one, or none)"""
