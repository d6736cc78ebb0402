"""Chat prompts: the thread, its context sources and the newest message, assembled within the
budget.

Each kind of context is a source (core.sources): the assembly walks the registered sources
(core.sources.registry) for their budget sections, in SPEC D order, plans the budget over them
(core.budget), and lays out what each kept in the prompt: the system prompt, then the messages.

Files reach the model as hidden context messages: a header naming the file, its language and
a fingerprint prefix, then its raw text in a fenced block (core.file_block), stored in the
thread where it was sent (`hidden`, kind `virtual_file_context`, with the file's id and whole
fingerprint in the message's metadata, where retention and refresh read them). Which files
(open files, snippets: every source's `contexts`) are sent follows the post-user-message
retention + refresh algorithm:

1. Build the candidate prompt: history (whole exchanges, and the latest context of each file,
   in the order they happened) plus the new user message.
2. Budget it (history is cut oldest first).
3. See which file contexts survived.
4. Send again, in priority order (active file, most recently edited, the others), every file
   whose context was dropped, has changed, or was never sent.
5. Budget again; repeat from 3 if a retained context was dropped; keep and store only the new
   contexts that survive.

So a file is not resent while it is unchanged and still in the window, is resent when the
budget dropped it, and is resent when it changed. A file's older contexts stay stored and go
with the turn they were sent in; those, the edit-ops and the long replies of turns outside the
hot window are shown as pointers when that pays (core.sources.thread).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from margin.core.budget import Plan, Window, plan
from margin.core.llm import ChatMessage
from margin.core.sources import base, registry
from margin.core.sources.base import CONTEXT_ROLE, HISTORY, PER_MESSAGE_OVERHEAD, SYSTEM, Draft, FileRef, Source, render
from margin.core.sources.summary import SUMMARY
from margin.core.sources.thread import current_turn
from margin.core.thread_facts import after_turn, facts
from margin.core.threads import FILE_CONTEXT, Message, NewMessage

__all__ = ["CONTEXT_ROLE", "PER_MESSAGE_OVERHEAD", "ChatAssembly", "ChatInput", "FileRef", "assemble_chat",
           "current_turn", "merge_roles", "render", "shown_history"]


@dataclass(frozen=True)
class ChatInput:
    history: Sequence[Message]
    """the thread as stored, hidden messages included, oldest first"""
    inputs: Mapping[str, Any] = field(default_factory=dict)
    """each source's input, by source name (core.sources.registry); a source given none has its
    default"""

    def input(self, source: Source) -> Any:
        return self.inputs.get(source.name, source.default)


@dataclass
class ChatAssembly:
    messages: list[ChatMessage]
    plan: Plan
    new_contexts: list[NewMessage] = field(default_factory=list)
    """file contexts sent for the first time in this prompt: stored only if the request succeeds"""
    superseded: list[int] = field(default_factory=list)
    """ids of stored contexts made obsolete by a newer one: pruned only if the request succeeds"""
    retained: list[str] = field(default_factory=list)
    """URIs whose stored context was sent again as it was (unchanged and still in the window)"""
    resent: list[str] = field(default_factory=list)
    """URIs sent anew (dropped, changed or never sent before)"""
    pointers: list[str] = field(default_factory=list)
    """the pointers the prompt shows, oldest first"""
    tools: Sequence[dict[str, Any]] = ()
    """the tools the request offers: the input's, when a pointer is shown"""

    @property
    def over_budget(self) -> str | None:
        return self.plan.over_budget


def shown_history(chat: ChatInput) -> Sequence[Message]:
    """The stored messages a prompt may show: all but those of the turns the summary folds
    (no prompt shows them, so none of their texts is counted)."""
    summary = chat.input(SUMMARY)
    if summary is None:
        return chat.history
    return after_turn(chat.history, summary.to_turn)


def texts_to_count(chat: ChatInput, shown: Sequence[Message] | None = None) -> list[str]:
    """Every text `assemble_chat` counts: the thread's (`shown`: shown_history, when the caller
    has made it; none, when it has counted them) and its sources'."""
    return [*(m.content for m in (shown_history(chat) if shown is None else shown)),
            *(text for source in registry.SOURCES for text in source.texts(chat.input(source)))]


def counted(chat: ChatInput, count: Callable[[str], int]) -> ChatInput:
    """`chat` with each source's input completed now that its texts are counted."""
    inputs = {source.name: source.counted(chat.input(source), chat.history, count) for source in registry.SOURCES}
    return ChatInput(chat.history, {**chat.inputs, **inputs})


def merge_roles(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Consecutive messages of one role joined with a blank line: several chat templates
    require roles to alternate."""
    merged: list[ChatMessage] = []
    for message in messages:
        if merged and merged[-1].role == message.role:
            merged[-1] = ChatMessage(message.role, merged[-1].content + "\n\n" + message.content)
        else:
            merged.append(message)
    return merged


def assemble_chat(chat: ChatInput, count: Callable[[str], int], window: Window) -> ChatAssembly:
    """The prompt to send for `chat`. `count` must know every text involved (the service
    counts them first, from stored counts or the tokenizer: texts_to_count)."""
    sources = list(registry.SOURCES)
    staged = sorted(sources, key=lambda source: source.stage)
    known = facts(chat.history)
    latest, superseded = dict(known.latest), list(known.superseded)
    candidates = {ref.file.uri: ref for source in sources for ref in source.contexts(chat.input(source))}
    resend = {uri for uri in candidates
              if uri not in latest or latest[uri].fingerprint != candidates[uri].file.fingerprint}
    room = window.context_window - window.reserved_output - window.margin
    draft = Draft(chat.inputs, chat.history, count, room, window.framing_tokens, latest,
                  {uri: base.render(ref) for uri, ref in candidates.items()}, resend)
    for source in sources:
        source.prepare(draft)
    draft.shown = [entry for entry in draft.shown if entry.turn > draft.folded]

    while True:
        draft.sections, draft.notes = {}, {}
        for source in staged:
            draft.sections[source.name] = source.section(draft)
        for source in staged:
            draft.sections[source.name] = source.settle(draft, draft.sections[source.name])
        result = plan([draft.sections[source.name] for source in sources], window)
        if result.over_budget:
            return ChatAssembly([], result)
        kept_contexts = {sent.message.uri for item in result.section(HISTORY).kept for sent in item.payload
                         if sent.message.kind == FILE_CONTEXT and not sent.pointers}
        dropped = {uri for uri in candidates if uri not in draft.resend and uri not in kept_contexts}
        if not dropped:
            break
        draft.resend |= dropped

    draft.plan = result
    parts = [part for source in sorted(sources, key=lambda source: source.at)
             for part in source.render(result.section(source.name), draft)]
    system = "\n\n".join(part.content for part in parts if part.role == SYSTEM and part.content)
    messages = [ChatMessage("system", system), *(ChatMessage(part.role, part.content) for part in parts
                                                 if part.role != SYSTEM)]
    new_contexts = [
        NewMessage(CONTEXT_ROLE, draft.blocks[ref.file.uri], hidden=True, kind=FILE_CONTEXT,
                   uri=ref.file.uri, fingerprint=ref.file.fingerprint, meta={"file_id": ref.file_id},
                   tokens={window.tokenizer: count(draft.blocks[ref.file.uri])})
        for ref in draft.sent
    ]
    superseded += [latest[ref.file.uri].id for ref in draft.sent if ref.file.uri in latest]
    retained = [uri for uri in candidates if uri in kept_contexts]
    return ChatAssembly(merge_roles(messages), result, new_contexts, sorted(superseded), retained,
                        [ref.file.uri for ref in draft.sent], draft.pointers, draft.tools)
