"""Each prompt source's input (core.sources), gathered for one chat or edit-ops request: a small
gatherer per source, by source name. A source with no gatherer is given its default."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from margin.core import pointers, recall_tool
from margin.core.sources import registry
from margin.core.sources.base import FileRef
from margin.core.sources.instructions import Rules
from margin.core.sources.message import Newest
from margin.core.sources.snippets import Snippets
from margin.core.sources.thread import Pointers
from margin.core.summary import Summary, latest_summary
from margin.core.threads import Message
from margin.services.profile import Profile
from margin.services.structured import tools_tokens
from margin.services.turn import Ask

if TYPE_CHECKING:
    from margin.services.app import MarginApp
    from margin.services.instructions import InstructionFiles
    from margin.services.memories import MemoriesService
    from margin.services.retrieval import Retrieval
    from margin.services.summaries import Summaries


class Context(Protocol):
    """The services a request's context comes from (chat's, and any other turn's that shows the
    same context): each None when that context is not shown."""

    @property
    def app(self) -> MarginApp: ...
    @property
    def instructions(self) -> InstructionFiles | None: ...
    @property
    def memories(self) -> MemoriesService | None: ...
    @property
    def retrieval(self) -> Retrieval | None: ...
    @property
    def summaries(self) -> Summaries | None: ...
    @property
    def recall_tool(self) -> bool: ...
    @property
    def masking(self) -> bool: ...
    @property
    def render_pointer(self) -> Callable[[int, str], str]: ...


@dataclass(frozen=True)
class Job:
    """One request, as its gatherers see it."""

    chat: Context
    ask: Ask
    profile: Profile
    history: Sequence[Message]
    files: Sequence[FileRef]
    """the files the prompt may include, most important first"""
    newest: str
    """the user's message, with the selected code"""
    tools: bool
    """the request may offer the `recall` tool"""

    @cached_property
    def summary(self) -> Summary | None:
        """The thread's latest summary, looked for once (the summary and pointers sources both
        need it)."""
        return latest_summary(self.history) if self.chat.summaries is not None else None


Gatherer = Callable[[Job], Awaitable[Any]]


async def system(job: Job) -> str:
    return job.profile.system


async def optional_system(job: Job) -> Sequence[tuple[str, str]]:
    return job.profile.optional_system


async def message(job: Job) -> Newest:
    return Newest(job.newest, job.profile.template.request)


async def files(job: Job) -> Sequence[FileRef]:
    return job.files


async def instructions(job: Job) -> Rules:
    if job.chat.instructions is None:
        return Rules()
    found = await job.chat.instructions.for_prompt(job.ask.where.text_document, job.profile.counter)
    return Rules(found.files, found.cut)


async def memories(job: Job) -> Sequence[str]:
    if job.chat.memories is None:
        return []
    return [m.text for m in await job.chat.memories.for_prompt(job.ask.where.text_document)]


async def snippets(job: Job) -> Snippets:
    found = [] if job.chat.retrieval is None else await job.chat.retrieval.snippets(
        job.ask.message, job.ask.where.text_document, [f.file.uri for f in job.files])
    return Snippets(found, job.chat.app.settings.current.globals.memory_share)


async def summary(job: Job) -> Summary | None:
    return job.summary


async def pointer_legend(job: Job) -> Pointers:
    chat, profile = job.chat, job.profile
    offered = recall_tool.TOOLS if job.tools and chat.recall_tool and profile.tools else ()
    legend = profile.pointer_legend(pointers.RECALL_BY_TOOL if offered else pointers.RECALL_BY_USER)
    folded = job.summary  # the turns it folds are not shown: no pointers are made for them
    return Pointers(legend, chat.masking, chat.render_pointer, tools=offered,
                    tools_tokens=await tools_tokens(profile.counter, offered),
                    after=folded.to_turn if folded is not None else 0)


GATHERERS: dict[str, Gatherer] = {
    "system": system,
    "instructions": instructions,
    "pointers": pointer_legend,
    "summary": summary,
    "snippets": snippets,
    "files": files,
    "memories": memories,
    "optional system": optional_system,
    "message": message,
}
"""By source name (core.sources.registry)."""


async def gather(job: Job) -> dict[str, Any]:
    """The input of every registered source that has a gatherer, by source name."""
    return {source.name: await GATHERERS[source.name](job) for source in registry.SOURCES if source.name in GATHERERS}
