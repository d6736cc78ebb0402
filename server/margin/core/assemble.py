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
budget dropped it, and is resent when it changed. Only a file's latest context is ever used;
older ones are superseded (and pruned when the turn is stored).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from margin.core.budget import Item, Plan, Section, plan
from margin.core.file_block import render_file
from margin.core.llm import ChatMessage
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

    @property
    def over_budget(self) -> str | None:
        return self.plan.over_budget


def _history_items(history: Sequence[Message], skip_contexts: set[str],
                   latest: dict[str, Message], count: Callable[[str], int]) -> list[Item]:
    """Whole exchanges and latest file contexts, oldest first."""
    items: list[Item] = []
    pending: list[Message] = []

    def flush() -> None:
        if pending:
            tokens = sum(count(m.content) + PER_MESSAGE_OVERHEAD for m in pending)
            items.append(Item(f"turn {pending[0].id}", tokens, tuple(pending)))
            pending.clear()

    for message in history:
        if message.kind == FILE_CONTEXT:
            if message.uri in skip_contexts or latest.get(message.uri or "") is not message:
                continue
            flush()
            items.append(Item(f"file {message.meta.get('file_id', message.uri)}",
                              count(message.content) + PER_MESSAGE_OVERHEAD, (message,)))
        elif message.hidden:
            continue
        else:
            if message.role == "user":
                flush()
            pending.append(message)
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
    counts them first, from stored counts or the tokenizer)."""
    latest: dict[str, Message] = {}
    superseded: list[int] = []
    for message in chat.history:
        if message.kind == FILE_CONTEXT and message.uri:
            if message.uri in latest:
                superseded.append(latest[message.uri].id)
            latest[message.uri] = message
    candidates = {ref.file.uri: ref for ref in chat.files}
    resend = {uri for uri in candidates
              if uri not in latest or latest[uri].fingerprint != candidates[uri].file.fingerprint}
    blocks = {uri: render(ref) for uri, ref in candidates.items()}

    while True:
        history = _history_items(chat.history, resend, latest, count)
        fresh = [ref for ref in chat.files if ref.file.uri in resend]
        sections = [
            Section("system", (Item("system prompt", count(chat.system) + PER_MESSAGE_OVERHEAD),),
                    required=True, is_system=True),
            Section("history", tuple(history), protect_last=chat.min_exchanges,
                    drop_reason="older than the kept history"),
            Section("files", tuple(
                Item(f"file {ref.file_id}", count(blocks[ref.file.uri]) + PER_MESSAGE_OVERHEAD, ref)
                for ref in reversed(fresh)  # dropped lowest priority first
            ), drop_reason="lower priority than the files kept"),
            Section("optional system", tuple(Item(name, count(text)) for name, text in chat.optional_system),
                    drop_reason="optional fragment; the rest did not fit"),
            Section("message", (Item("newest message", count(chat.newest) + PER_MESSAGE_OVERHEAD),),
                    required=True),
        ]
        result = plan(sections, context_window=context_window, reserved_output=reserved_output,
                      tokenizer=tokenizer, exact=exact, framing_tokens=framing_tokens)
        if result.over_budget:
            return ChatAssembly([], result)
        kept_contexts = {m.uri for item in result.section("history").kept for m in item.payload
                         if m.kind == FILE_CONTEXT}
        dropped = {uri for uri in candidates if uri not in resend and uri not in kept_contexts}
        if not dropped:
            break
        resend |= dropped

    kept_optional = [item.id for item in result.section("optional system").kept]
    system = "\n\n".join([chat.system] + [text for name, text in chat.optional_system if name in kept_optional])
    messages = [ChatMessage("system", system)]
    for item in result.section("history").kept:
        messages.extend(ChatMessage(CONTEXT_ROLE if m.kind == FILE_CONTEXT else m.role, m.content)
                        for m in item.payload)
    sent = [item.payload for item in result.section("files").kept][::-1]  # priority order
    messages.extend(ChatMessage(CONTEXT_ROLE, blocks[ref.file.uri]) for ref in sent)
    messages.append(ChatMessage("user", chat.newest))

    new_contexts = [
        NewMessage(CONTEXT_ROLE, blocks[ref.file.uri], hidden=True, kind=FILE_CONTEXT,
                   uri=ref.file.uri, fingerprint=ref.file.fingerprint, meta={"file_id": ref.file_id},
                   tokens={tokenizer: count(blocks[ref.file.uri])})
        for ref in sent
    ]
    superseded += [latest[ref.file.uri].id for ref in sent if ref.file.uri in latest]
    retained = [uri for uri in candidates if uri in kept_contexts]
    return ChatAssembly(merge_roles(messages), result, new_contexts, sorted(superseded), retained,
                        [ref.file.uri for ref in sent])
