"""The wire format of inline completion: standard LSP params (fields Margin does not use are
ignored) and results (see lsp/wire.py for Margin's own requests)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from margin.core.vfs import Position
from margin.lsp.wire import RangeModel, _Wire
from margin.services.completion import CompletionRequest


class _Standard(_Wire):
    model_config = ConfigDict(extra="ignore", alias_generator=to_camel, populate_by_name=True)


class VersionedDocumentModel(_Standard):
    uri: Annotated[str, Field(min_length=1)]
    version: int | None = None
    """sent by some clients (Copilot's protocol); an answer for an older version is empty"""


class StandardPosition(_Standard):
    line: Annotated[int, Field(ge=0)]
    """zero-based"""
    character: Annotated[int, Field(ge=0)]
    """zero-based, in the position encoding agreed at `initialize`"""


class SelectedCompletionInfoModel(_Standard):
    text: str
    """the item selected in the editor's completion menu"""


class InlineCompletionContextModel(_Standard):
    trigger_kind: Literal[1, 2] = 2
    """1: asked for; 2: as the user types"""
    selected_completion_info: SelectedCompletionInfoModel | None = None
    """set when the editor's completion menu has an item selected: Margin then answers nothing"""


class InlineCompletionRequestParams(_Standard):
    text_document: VersionedDocumentModel
    position: StandardPosition
    """the cursor"""
    context: InlineCompletionContextModel = InlineCompletionContextModel()

    def core(self) -> CompletionRequest:
        return CompletionRequest(self.text_document.uri, Position(self.position.line, self.position.character),
                                 self.text_document.version)


class InlineCompletionItemModel(_Wire):
    insert_text: str
    """the suggestion"""
    range: RangeModel | None = None
    """only when the suggestion replaces text after the cursor; without it the editor inserts at
    the cursor (Neovim then shows the suggestion inline, not drawn over the rest of the line)"""


class InlineCompletionListModel(_Wire):
    items: list[InlineCompletionItemModel]
    """one suggestion, or none"""
