"""The prompt sources, registered once, in SPEC D order: this is the budget report's order and
the order the budget cuts in (the required sections are never cut; the others from the first
to the last: conversation turns oldest first, then the summary, then lower-priority context —
snippets, files, memories — then optional system fragments). Where each source's text goes in
the prompt is its own `at`. A new kind of context is a module with its source, and a line
here."""

from __future__ import annotations

from margin.core.sources.base import Source
from margin.core.sources.files import FILES
from margin.core.sources.instructions import INSTRUCTIONS
from margin.core.sources.memories import MEMORIES
from margin.core.sources.message import MESSAGE
from margin.core.sources.snippets import SNIPPETS
from margin.core.sources.summary import SUMMARY
from margin.core.sources.system import OPTIONAL_SYSTEM, SYSTEM_PROMPT
from margin.core.sources.thread import HISTORY_SOURCE, POINTERS

SOURCES: list[Source] = [
    SYSTEM_PROMPT,
    INSTRUCTIONS,
    POINTERS,
    HISTORY_SOURCE,
    SUMMARY,
    SNIPPETS,
    FILES,
    MEMORIES,
    OPTIONAL_SYSTEM,
    MESSAGE,
]
