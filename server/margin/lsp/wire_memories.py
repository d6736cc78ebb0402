"""The wire format of memories: margin/remember, margin/forget and margin/memories (see
lsp/wire.py for the rest of Margin's own requests). A memory's text and scope are checked by
the rules in `core.memories`, so bad params are InvalidParams naming the field and the rule."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from margin.core import memories
from margin.core.memories import Memory
from margin.lsp.wire import DocumentModel, _Wire


class RememberParams(_Wire):
    text: str
    """stored stripped"""
    scope: str = "workspace"
    """"workspace" (the document's workspace folder) or "global" (every workspace)"""
    text_document: DocumentModel | None = None
    """a document of the workspace folder a workspace memory is for"""

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        return memories.memory_text(value)

    @field_validator("scope")
    @classmethod
    def _scope(cls, value: str) -> str:
        return memories.memory_scope(value)

    @property
    def uri(self) -> str | None:
        return self.text_document.uri if self.text_document else None


class RememberResult(_Wire):
    id: str
    """the memory's id"""


class ForgetParams(_Wire):
    id: Annotated[str, Field(min_length=1, max_length=100)]
    """the memory's id"""


class ForgetResult(_Wire):
    removed: bool
    """false when there was no such memory"""


class MemoriesParams(_Wire):
    text_document: DocumentModel | None = None

    @property
    def uri(self) -> str | None:
        return self.text_document.uri if self.text_document else None


class MemoryModel(_Wire):
    id: str
    text: str
    scope: str
    """workspace or global"""
    created: float
    """epoch seconds, as threads' `createdAt`"""

    @classmethod
    def of(cls, memory: Memory) -> MemoryModel:
        return cls(id=memory.id, text=memory.text, scope=memory.scope, created=memory.created)


class MemoriesResult(_Wire):
    memories: list[MemoryModel]
    """the workspace's and the global ones, newest first"""
    persistent: bool
    """false when the database could not be used and memories are kept only until Margin stops"""
