"""What a kind of prompt context is to the chat assembler (core.assemble): a source, with its
input, its budget section (its priority is its place in the registry, its cut rule the
section's order and reason), and where its text goes in the prompt.

A source is given its input by name (`ChatInput.inputs`, gathered by the services), says which
texts it will need counted, makes its section each round of the assembly, and renders what the
budget kept. Sources are asked in stages, so that one can size itself from what the others
took: PLAIN sections first (each on its own), then the THREAD (the history, which may show old
content as pointers), what the thread shows (AFTER_THREAD: the pointers' legend), and last the
sources that FILL a share of what is left (retrieved snippets). Then, in the same order, each
may settle: the history masks more when the whole does not fit, a fill source borrows what the
others left unused.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from margin.core.budget import Item, Plan, Section, SectionResult
from margin.core.file_block import render_file
from margin.core.llm import Role
from margin.core.pointers import Shown
from margin.core.threads import Message
from margin.core.vfs import VirtualFile

PER_MESSAGE_OVERHEAD = 10
"""Tokens a message's framing is estimated to cost (role markers, separators, the blank line
joining merged messages: OpenAI 4, Mistral 2, Gemma ~9). The final prompt is then counted
whole, and cut further if the estimate fell short."""
CONTEXT_ROLE: Final = "user"
"""File contexts are sent as the user's data (the system prompt says they are data)."""
SYSTEM: Final = "system"
"""The role of a part that joins the system prompt."""
HISTORY = "history"
"""The section of the thread's stored messages, where sent file contexts are retained."""

PLAIN, THREAD, AFTER_THREAD, FILL = 0, 1, 2, 3
"""The stages sources make their sections in (see the module's docstring)."""


@dataclass(frozen=True)
class FileRef:
    """A file the prompt may include. `file_id` is what the model sees: the path relative to
    its workspace folder, or the URI for a file outside every folder."""

    file: VirtualFile
    file_id: str


BLOCKS_KEPT_CHARS = 4_000_000
"""The rendered blocks `render` keeps, in characters: the files of the last few requests."""
_blocks: OrderedDict[tuple[str, str, str], str] = OrderedDict()
_blocks_lock = threading.Lock()


def render(ref: FileRef) -> str:
    """The file as the model sees it (core.file_block). A request renders each of its files
    several times (to count, to assemble, each round), and the next request the same files:
    the block is kept by file id, language and fingerprint (the text's sha256), which decide it,
    and is the same string each time (its hash computed once)."""
    key = (ref.file_id, ref.file.language_id, ref.file.fingerprint)
    with _blocks_lock:  # assembly runs in counting threads (core/tokens/counter.py), the loop renders too
        block = _blocks.get(key)
        if block is not None:
            _blocks.move_to_end(key)
            return block
    made = render_file(ref.file_id, ref.file.language_id, ref.file.fingerprint, ref.file.text)
    with _blocks_lock:
        block = _blocks.setdefault(key, made)
        kept = sum(map(len, _blocks.values()))
        while kept > BLOCKS_KEPT_CHARS and len(_blocks) > 1:
            kept -= len(_blocks.popitem(last=False)[1])
    return block


class Sent(NamedTuple):
    """A stored message as this prompt shows it."""

    message: Message
    content: str
    pointers: tuple[str, ...] = ()


class Part(NamedTuple):
    """A piece of the prompt: `role` SYSTEM joins the system prompt, any other is a message."""

    role: Role
    content: str


@dataclass
class Draft:
    """One assembly's working state, shared by its sources."""

    inputs: Mapping[str, Any]
    """each source's input, by source name"""
    thread: Sequence[Message]
    """the thread as stored, hidden messages included, oldest first"""
    count: Callable[[str], int]
    room: int
    """the window less the reserved output and the safety margin"""
    framing: int
    latest: dict[str, Message]
    """the latest stored file context of each URI"""
    blocks: dict[str, str]
    """each candidate file's block, by URI"""
    resend: set[str]
    """URIs whose file is sent anew (not retained in the history as it is)"""
    shown: Sequence[Shown] = ()
    """the stored messages the prompt may show, with their pointers"""
    folded: int = 0
    """the turns up to this one are folded into a summary: not shown"""
    sections: dict[str, Section] = field(default_factory=dict)
    """this round's sections so far, by name"""
    notes: dict[str, Any] = field(default_factory=dict)
    """a source's own working values for this round, by source name"""
    kept: dict[str, Any] = field(default_factory=dict)
    """a source's own working values for every round of the assembly, by source name"""
    sent: list[FileRef] = field(default_factory=list)
    """the files the rendered prompt sends anew, in prompt order"""
    pointers: list[str] = field(default_factory=list)
    """the pointers the rendered prompt shows"""
    tools: Sequence[dict[str, Any]] = ()
    """the tools the request offers"""
    plan: Plan | None = None
    """the budget's plan, once made"""

    def input(self, source: Source) -> Any:
        return self.inputs.get(source.name, source.default)

    def spent(self, *, required: bool = False, leaving: str = "") -> int:
        """Tokens this round's sections take with the framing (only the required ones; or all
        but `leaving`)."""
        return self.framing + sum(item.tokens for section in self.sections.values()
                                  if (section.required or not required) and section.name != leaving
                                  for item in section.items)


class Source:
    """A kind of prompt context. Subclasses set `name` (its budget section), `at` (its place in
    the prompt: parts are laid out in this order) and `default` (its input when given none)."""

    name: str = ""
    at: int = 0
    stage: int = PLAIN
    default: Any = None

    def texts(self, given: Any) -> list[str]:
        """The texts the assembly will count for this input (besides the thread's)."""
        return [render(ref) for ref in self.contexts(given)]

    def counted(self, given: Any, thread: Sequence[Message], count: Callable[[str], int]) -> Any:
        """The input completed once its texts are counted (its further texts are then counted too)."""
        return given

    def contexts(self, given: Any) -> Sequence[FileRef]:
        """Files this source sends as stored contexts: retained while in the window, resent
        when dropped or changed (SPEC D)."""
        return ()

    def prepare(self, draft: Draft) -> None:
        """Before the first round: what it sets in the draft for every round."""

    def section(self, draft: Draft) -> Section:
        raise NotImplementedError

    def settle(self, draft: Draft, section: Section) -> Section:
        """Its section once every source has made one."""
        return section

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        """What the prompt shows of what the budget kept."""
        raise NotImplementedError


def items_of(refs: Sequence[FileRef], label: str, draft: Draft) -> list[Item]:
    """A file-like source's items: each file sent anew, as its block with a message's framing."""
    return [Item(f"{label} {ref.file_id}", draft.count(draft.blocks[ref.file.uri]) + PER_MESSAGE_OVERHEAD, ref)
            for ref in refs if ref.file.uri in draft.resend]


def sent_parts(refs: Sequence[FileRef], draft: Draft) -> list[Part]:
    """The blocks of files sent anew, noted in the draft to be stored with the turn."""
    draft.sent.extend(refs)
    return [Part(CONTEXT_ROLE, draft.blocks[ref.file.uri]) for ref in refs]
