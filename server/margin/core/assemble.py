"""Chat prompts: the thread, the open files and the newest message, assembled within the budget.

Files reach the model as hidden context messages: a header naming the file, its language and
a fingerprint prefix, then its raw text in a fenced block (core.file_block), stored in the
thread where it was sent (`hidden`, kind `virtual_file_context`, with the file's id and whole
fingerprint in the message's metadata, where retention and refresh read them). Which files are sent follows the post-user-message retention + refresh
algorithm:

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
hot window are shown as pointers (core.pointers) when that pays: when what they save is more
than the legend and the recall tool cost (every pointer shares that fixed cost), or when the
prompt needs the room. Then the masking line is the first of `mask_lines` (steps of MASK_BATCH
turns, so the start of the prompt — what a backend's prompt cache holds — stays as it was for
most turns) at which the whole prompt fits, so turns are dropped only when even the most masking
leaves it too large. The pointers' legend joins the system prompt exactly when a pointer is
shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

from margin.core import instructions as rules
from margin.core import pointers
from margin.core.budget import Item, Plan, Section, plan, safety_margin
from margin.core.file_block import render_file
from margin.core.llm import ChatMessage
from margin.core.summary import Summary
from margin.core.threads import FILE_CONTEXT, Message, NewMessage
from margin.core.vfs import VirtualFile

PER_MESSAGE_OVERHEAD = 10
"""Tokens a message's framing is estimated to cost (role markers, separators, the blank line
joining merged messages: OpenAI 4, Mistral 2, Gemma ~9). The final prompt is then counted
whole, and cut further if the estimate fell short."""
CONTEXT_ROLE = "user"
"""File contexts are sent as the user's data (the system prompt says they are data)."""


@dataclass(frozen=True)
class FileRef:
    """A file the prompt may include. `file_id` is what the model sees: the path relative to
    its workspace folder, or the URI for a file outside every folder."""

    file: VirtualFile
    file_id: str


def render(ref: FileRef) -> str:
    """The file as the model sees it (core.file_block)."""
    return render_file(ref.file_id, ref.file.language_id, ref.file.fingerprint, ref.file.text)


@dataclass(frozen=True)
class ChatInput:
    system: str
    """the template's required fragments, joined"""
    optional_system: Sequence[tuple[str, str]]
    """(name, text) of the template's optional fragments"""
    history: Sequence[Message]
    """the thread as stored, hidden messages included, oldest first"""
    newest: str
    files: Sequence[FileRef]
    """files the prompt may include, most important first"""
    min_exchanges: int = 2
    legend: str = f"{pointers.LEGEND} {pointers.RECALL_BY_USER}"
    """what pointers mean and how to see their content again: joins the system prompt when a
    pointer is shown"""
    masking: bool = True
    """False: old content is shown whole or dropped, never as a pointer"""
    render_pointer: Callable[[int, str], str] = pointers.pointer
    shown: Sequence[pointers.Shown] | None = None
    """pointers.show(history), when the caller has already made it"""
    summary: Summary | None = None
    """the thread's summary (core.summary): the turns it covers are not shown"""
    tools: Sequence[dict[str, Any]] = ()
    """tools offered with the legend (the `recall` tool), and `tools_tokens`, what their
    definitions cost"""
    tools_tokens: int = 0
    instructions: Sequence[rules.InstructionFile] = ()
    """the project's instruction files within their cap, farthest first: required, in the
    system prompt (core.instructions)"""
    instructions_cut: Sequence[str] = ()
    """the instruction files, or their ends, left out over the cap"""
    memories: Sequence[str] = ()
    """facts the user pinned, oldest first: in the system prompt, dropped oldest first"""
    snippets: Sequence[FileRef] = ()
    """windows of workspace files retrieved for the message, most relevant first: sent and
    retained like files, cut before them"""
    snippet_share: float = 0.3
    """the share of the room the required parts leave that snippets may fill (more when the
    rest leaves room unused)"""
    request: str = ""
    """what this kind of request asks of the answer (the template's `[request]` fragments): sent
    after the newest message, required"""


MEMORIES_HEADING = "Facts the user asked you to remember:"


def memory_line(text: str) -> str:
    return "- " + " ".join(text.split())


def memories_text(memories: Sequence[str]) -> str:
    return "\n".join([MEMORIES_HEADING, *map(memory_line, memories)]) if memories else ""


def texts_to_count(chat: ChatInput) -> list[str]:
    """The texts beyond the thread, files and system prompt that `assemble_chat` counts."""
    return [*rules.texts_to_count(chat.instructions), MEMORIES_HEADING,
            *map(memory_line, chat.memories), *map(render, chat.snippets)]


class Sent(NamedTuple):
    """A stored message as this prompt shows it."""

    message: Message
    content: str
    pointers: tuple[str, ...] = ()


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


def current_turn(history: Sequence[Message]) -> int:
    """The number of the turn being asked: one more than the user messages stored."""
    return 1 + sum(1 for m in history if m.role == "user" and not m.hidden and m.kind != FILE_CONTEXT)


def _tokens(texts: Sequence[str], count: Callable[[str], int]) -> int:
    """A message's parts, joined by a blank line each, with its framing."""
    return sum(map(count, texts)) + len(texts) - 1 + PER_MESSAGE_OVERHEAD


def _history_items(shown: Sequence[pointers.Shown], skip_contexts: set[str], latest: dict[str, Message],
                   line: int | None, count: Callable[[str], int], masking: bool = True) -> list[Item]:
    """Whole exchanges and latest file contexts, oldest first. A superseded file context goes
    with the turn it was sent in: as its pointer when pointers are shown (`line` not None), else
    left out (a file's older text is never shown; without `masking` at all it is whole); the
    parts of turns up to `line` whose pointer is shorter are pointers."""
    items: list[Item] = []
    pending: list[Sent] = []
    carried: list[Sent] = []  # the contexts stored before the next user message
    sizes: list[int] = []

    def flush() -> None:
        if pending:
            items.append(Item(f"turn {pending[0].message.id}", sum(sizes), tuple(pending)))
            pending.clear()
            sizes.clear()

    for entry in shown:
        message = entry.message
        if message.kind == FILE_CONTEXT:
            if message.uri not in skip_contexts and latest.get(message.uri or "") is message:
                flush()
                items.append(Item(f"file {message.meta.get('file_id', message.uri)}",
                                  count(message.content) + PER_MESSAGE_OVERHEAD, (Sent(message, message.content),)))
            elif not masking:
                carried.append(Sent(message, message.content))
            elif line is not None:
                ref = entry.parts[0].pointer or ""
                carried.append(Sent(message, ref, (ref,)))
            continue
        if message.role == "user":
            flush()
            for sent in carried:
                pending.append(sent)
                sizes.append(count(sent.content) + PER_MESSAGE_OVERHEAD)
            carried.clear()
        texts, refs = entry.view(line, count) if line is not None else ([p.text for p in entry.parts], [])
        pending.append(Sent(message, "\n\n".join(texts), tuple(refs)))
        sizes.append(_tokens(texts, count))
    flush()
    return items


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


def assemble_chat(
    chat: ChatInput,
    count: Callable[[str], int],
    *,
    context_window: int,
    reserved_output: int,
    tokenizer: str,
    exact: bool,
    framing_tokens: int = 0,
) -> ChatAssembly:
    """The prompt to send for `chat`. `count` must know every text involved (the service
    counts them first, from stored counts or the tokenizer: pointers.texts_to_count)."""
    latest: dict[str, Message] = {}
    superseded: list[int] = []
    for message in chat.history:
        if message.kind == FILE_CONTEXT and message.uri:
            if message.uri in latest:
                superseded.append(latest[message.uri].id)
            latest[message.uri] = message
    candidates = {ref.file.uri: ref for ref in (*chat.files, *chat.snippets)}
    snippet_uris = {ref.file.uri for ref in chat.snippets}
    resend = {uri for uri in candidates
              if uri not in latest or latest[uri].fingerprint != candidates[uri].file.fingerprint}
    blocks = {uri: render(ref) for uri, ref in candidates.items()}
    shown = chat.shown if chat.shown is not None else pointers.show(chat.history, count, chat.render_pointer)
    summary = chat.summary
    if summary is not None:  # the turns it folds are not shown; their files are sent again if need be
        shown = [entry for entry in shown if entry.turn > summary.to_turn]
    summary_items = (Item(f"summary of turns {summary.first_turn}–{summary.to_turn}",
                          count(summary.shown()) + PER_MESSAGE_OVERHEAD, summary),) if summary else ()
    lines = pointers.mask_lines(current_turn(chat.history)) if chat.masking else [0]
    legend_tokens = count(chat.legend) if chat.masking else 0
    fixed = legend_tokens + chat.tools_tokens  # what showing any pointer costs
    system_tokens = count(chat.system) + PER_MESSAGE_OVERHEAD
    instructions = rules.section(chat.instructions, chat.instructions_cut, count)
    memories = tuple(Item(f"memory {i + 1}", count(memory_line(text)) + 1
                          + (count(MEMORIES_HEADING) + 2 if i == len(chat.memories) - 1 else 0), text)
                     for i, text in enumerate(chat.memories))  # the newest carries the heading: dropped last
    room = context_window - reserved_output - safety_margin(context_window, exact)

    while True:
        fresh = [ref for ref in chat.files if ref.file.uri in resend]
        files = tuple(Item(f"file {ref.file_id}", count(blocks[ref.file.uri]) + PER_MESSAGE_OVERHEAD, ref)
                      for ref in reversed(fresh))  # dropped lowest priority first
        snippets = [Item(f"snippet {ref.file_id}", count(blocks[ref.file.uri]) + PER_MESSAGE_OVERHEAD, ref)
                    for ref in chat.snippets if ref.file.uri in resend]  # most relevant first
        optional = tuple(Item(name, count(text)) for name, text in chat.optional_system)
        newest = count(chat.newest) + PER_MESSAGE_OVERHEAD
        request = count(chat.request) + 1 if chat.request else 0  # and the blank line before it
        base = system_tokens + sum(i.tokens for i in instructions.items) + newest + request + framing_tokens
        costs = pointers.Economy(shown, resend, latest, fixed, count, PER_MESSAGE_OVERHEAD) if chat.masking else None
        # Pointers are shown when they save more than they cost, or the room is needed.
        line = lines[0] if costs is not None and costs.pay(lines[0]) else None
        required = base + (fixed if line is not None else 0)
        history = _history_items(shown, resend, latest, line, count, chat.masking)
        # the share holds the snippets retained in the history too: sent once, they keep their place
        retained = sum(item.tokens for item in history if item.payload[0].message.uri in snippet_uris)
        share = math.floor(max(0, room - required) * chat.snippet_share) - retained
        packed, over_share = _pack(snippets, share)
        others = sum(i.tokens for i in (*files, *optional, *summary_items, *memories))
        rest = required + others + sum(i.tokens for i in (*history, *packed))
        if costs is not None and rest > room:  # the room is needed: mask more, in MASK_BATCH steps
            plain = rest + (costs.gain(line) if line is not None else 0)  # the same without pointers
            wider = costs.line_for(lines, plain - room)
            if wider != line:
                line, required = wider, base + (fixed if wider is not None else 0)
                history = _history_items(shown, resend, latest, line, count)
        unused = room - required - others - sum(i.tokens for i in history)
        if unused > share and over_share:  # snippets borrow what the rest leaves unused
            packed, over_share = _pack(snippets, unused)
        shows_pointers = any(sent.pointers for item in history for sent in item.payload)
        sections = [
            Section("system", (Item("system prompt", system_tokens),), required=True, is_system=True),
            instructions,
            Section("pointers", ((Item("legend", legend_tokens),) + ((Item("recall tool", chat.tools_tokens),)
                                 if chat.tools else ())) if shows_pointers else (), required=True),
            Section("history", tuple(history), protect_last=chat.min_exchanges,
                    drop_reason="older than the kept history"),
            Section("summary", summary_items, drop_reason="the turns after it came first"),
            Section("snippets", tuple(packed[::-1]), cut_before=tuple(over_share),
                    drop_reason="less relevant than the snippets kept, within the memory share"),
            Section("files", files, drop_reason="lower priority than the files kept"),
            Section("memories", memories, drop_reason="older than the memories kept"),
            Section("optional system", optional, drop_reason="optional fragment; the rest did not fit"),
            Section("message", (Item("newest message", newest),)
                    + ((Item("request instructions", request),) if request else ()), required=True),
        ]
        result = plan(sections, context_window=context_window, reserved_output=reserved_output,
                      tokenizer=tokenizer, exact=exact, framing_tokens=framing_tokens)
        if result.over_budget:
            return ChatAssembly([], result)
        kept_contexts = {sent.message.uri for item in result.section("history").kept for sent in item.payload
                         if sent.message.kind == FILE_CONTEXT and not sent.pointers}
        dropped = {uri for uri in candidates if uri not in resend and uri not in kept_contexts}
        if not dropped:
            break
        resend |= dropped

    shown_refs = _pointer_report(result, count)
    kept_optional = [item.id for item in result.section("optional system").kept]
    kept_memories = [item.payload for item in result.section("memories").kept]
    system = "\n\n".join(part for part in [chat.system, rules.render(chat.instructions), memories_text(kept_memories),
                                             chat.legend if shown_refs else ""] if part)
    system = "\n\n".join([system] + [text for name, text in chat.optional_system if name in kept_optional])
    messages = [ChatMessage("system", system)]
    messages.extend(ChatMessage("user", item.payload.shown()) for item in result.section("summary").kept)
    for item in result.section("history").kept:
        messages.extend(ChatMessage(CONTEXT_ROLE if sent.message.kind == FILE_CONTEXT else sent.message.role,
                                    sent.content) for sent in item.payload)
    sent_snippets = [item.payload for item in result.section("snippets").kept][::-1]  # most relevant first
    sent_files = [item.payload for item in result.section("files").kept][::-1]  # priority order
    messages.extend(ChatMessage(CONTEXT_ROLE, blocks[ref.file.uri]) for ref in (*sent_snippets, *sent_files))
    messages.append(ChatMessage("user", f"{chat.newest}\n\n{chat.request}" if chat.request else chat.newest))

    new_contexts = [
        NewMessage(CONTEXT_ROLE, blocks[ref.file.uri], hidden=True, kind=FILE_CONTEXT,
                   uri=ref.file.uri, fingerprint=ref.file.fingerprint, meta={"file_id": ref.file_id},
                   tokens={tokenizer: count(blocks[ref.file.uri])})
        for ref in (*sent_snippets, *sent_files)
    ]
    superseded += [latest[ref.file.uri].id for ref in (*sent_snippets, *sent_files) if ref.file.uri in latest]
    retained = [uri for uri in candidates if uri in kept_contexts]
    return ChatAssembly(merge_roles(messages), result, new_contexts, sorted(superseded), retained,
                        [ref.file.uri for ref in (*sent_snippets, *sent_files)], shown_refs,
                        chat.tools if shown_refs else ())


def _pack(ranked: Sequence[Item], cap: int) -> tuple[list[Item], list[Item]]:
    """Seed 002's packing: items in rank order until the next one would pass `cap`; the rest."""
    spent = 0
    for at, item in enumerate(ranked):
        if spent + item.tokens > cap:
            return list(ranked[:at]), list(ranked[at:])
        spent += item.tokens
    return list(ranked), []


def _pointer_report(result: Plan, count: Callable[[str], int]) -> list[str]:
    """The pointers the kept history shows, in order. The budget report shows them in their own
    section with the legend, and the history without them."""
    shown = [ref for item in result.section("history").kept for sent in item.payload for ref in sent.pointers]
    if shown:
        history, section = result.section("history"), result.section("pointers")
        tokens = sum(count(ref) for ref in shown)
        history.tokens -= tokens
        section.tokens += tokens
        section.kept = (*section.kept, *(Item(ref, count(ref)) for ref in shown))
    return shown
