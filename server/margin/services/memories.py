"""Memory use cases: remember a fact for this workspace folder or for every workspace, forget
it, list the memories a document's workspace sees, and the ones its prompts show. The language
server and the terminal call these; memories are kept in the thread store, so when the database
cannot be used they are kept in memory for the session, like threads."""

from __future__ import annotations

import logging

from margin.core import memories
from margin.core.memories import InvalidMemory, Memory
from margin.services.app import MarginApp
from margin.services.errors import RequestError

log = logging.getLogger(__name__)


class MemoriesService:
    def __init__(self, app: MarginApp) -> None:
        self.app = app

    async def remember(self, text: str, scope: str = "workspace", text_document: str | None = None) -> Memory:
        """A new memory for the workspace of `text_document` (or for every workspace); a
        RequestError says what is wrong with it (nothing is stored then)."""
        try:
            text, valid_scope, workspace = memories.checked(text, scope, self.app.workspace.folder_of(text_document))
        except InvalidMemory as error:
            raise RequestError(_sentence(str(error))) from None
        memory = await self.app.storage.run(lambda store: store.add_memory(text, valid_scope, workspace))
        log.info("memory remembered id=%s scope=%s chars=%d", memory.id, memory.scope, len(memory.text))
        return memory

    async def forget(self, memory_id: str) -> bool:
        """False when there is no such memory (forgotten already, or never made)."""
        removed = await self.app.storage.run(lambda store: store.remove_memory(memory_id))
        log.info("memory forgotten id=%s removed=%s", memory_id[:40], removed)
        return removed

    async def memories(self, text_document: str | None = None) -> list[Memory]:
        """The memories of `text_document`'s workspace and the global ones, newest first."""
        workspace = self.app.workspace.folder_of(text_document)
        return await self.app.storage.run(lambda store: store.list_memories(workspace))

    async def for_prompt(self, text_document: str | None = None) -> list[Memory]:
        """What a prompt in `text_document`'s workspace shows: the same memories, oldest first,
        so the start of the prompt stays the same as memories are added."""
        return memories.for_prompt(await self.memories(text_document))

    @property
    def persistent(self) -> bool:
        """False when the database could not be used and memories live only in memory."""
        return self.app.storage.persistent

    @property
    def problem(self) -> str | None:
        """Why memories are not being saved, or None."""
        return self.app.storage.problem


def _sentence(text: str) -> str:
    """A rule's message (written to follow a field name) as a sentence of its own."""
    return text[:1].upper() + text[1:] + "."
