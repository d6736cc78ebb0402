"""Chat assembly: seed 000's retention + refresh invariants, priorities, and the budget."""

from __future__ import annotations

import itertools

from margin.core.assemble import ChatInput, FileRef, assemble_chat, merge_roles
from margin.core.budget import Window
from margin.core.file_block import parse_file_blocks
from margin.core.llm import ChatMessage
from margin.core.sources.message import Newest
from margin.core.threads import FILE_CONTEXT, Message, NewMessage
from margin.core.tokens.counter import heuristic_count
from margin.core.vfs import VirtualFile, fingerprint

_ids = itertools.count(1)


def chat_input(history, newest: str, files=(), *, system: str = "You are Margin.", optional=(), request: str = "",
               **inputs) -> ChatInput:
    """A chat's input: the template's parts, the message and the open files; other sources' inputs by
    their names."""
    return ChatInput(history, {"system": system, "optional system": optional, "message": Newest(newest, request),
                               "files": files, **inputs})


def stored(new: NewMessage) -> Message:
    return Message(**new.__dict__, id=next(_ids), thread_id="t", created_at=0.0)


class Thread:
    """A thread as the chat service keeps it: what a successful turn stores, it stores."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def turn(self, newest: str, files: list[FileRef], *, window: int = 8000, output: int = 500):
        result = assemble_chat(chat_input(self.messages, newest, files, optional=[("style", "Be brief.")]), heuristic_count,
                               Window(window, output, "heuristic", False))
        if result.over_budget:
            return result
        self.messages += [stored(m) for m in result.new_contexts]  # nothing stored is ever removed
        self.messages += [stored(NewMessage("user", newest)), stored(NewMessage("assistant", f"reply to {newest}"))]
        return result


def ref(name: str, text: str, version: int = 1) -> FileRef:
    return FileRef(VirtualFile(f"file:///ws/{name}", "python", version, text), name)


def contexts_in(messages: list[ChatMessage]) -> list[dict]:
    """The file blocks in the prompt, each with the whole fingerprint of the text it holds."""
    return [{"file_id": b.file_id, "fingerprint": fingerprint(b.text), "shown": b.fingerprint, "content": b.text}
            for message in messages for b in parse_file_blocks(message.content)]


def test_unchanged_retained_file_is_not_resent():
    thread = Thread()
    a = ref("a.py", "x = 1\n")
    first = thread.turn("what is x?", [a])
    assert first.resent == ["file:///ws/a.py"] and len(first.new_contexts) == 1
    second = thread.turn("and now?", [a])
    assert second.resent == [] and second.retained == ["file:///ws/a.py"] and second.new_contexts == []
    assert [c["fingerprint"] for c in contexts_in(second.messages)] == [a.file.fingerprint]


def test_changed_file_is_resent_and_the_old_context_superseded():
    thread = Thread()
    thread.turn("hi", [ref("a.py", "x = 1\n")])
    old_id = next(m.id for m in thread.messages if m.kind == FILE_CONTEXT)
    edited = ref("a.py", "x = 2\n", version=2)
    result = thread.turn("I changed it", [edited])
    assert result.resent == ["file:///ws/a.py"] and result.superseded == [old_id]
    sent = contexts_in(result.messages)
    assert [c["fingerprint"] for c in sent] == [edited.file.fingerprint]  # never the stale one
    assert sum(1 for m in thread.messages if m.kind == FILE_CONTEXT) == 2  # the old one stays stored …
    # … and a pointer to it would cost more than it saves (its legend), so the prompt has none
    assert result.pointers == [] and "[t1 a.py]" not in "".join(m.content for m in result.messages)


def test_file_dropped_by_the_budget_is_resent():
    thread = Thread()
    a = ref("a.py", "def f():\n    return 1\n")
    thread.turn("start", [a], window=3000)
    for i in range(30):  # history grows until the first turn, and a.py's context, fall out
        result = thread.turn(f"question {i} " + "words " * 40, [a], window=3000)
        if result.resent:
            break
    assert result.resent == ["file:///ws/a.py"], "the dropped context was not resent"
    assert [c["fingerprint"] for c in contexts_in(result.messages)] == [a.file.fingerprint]
    assert result.plan.section("history").dropped  # it was the budget that dropped it


def test_priority_order_under_a_tight_budget():
    active = ref("active.py", "a = 1\n" * 60)
    edited = ref("edited.py", "b = 2\n" * 60)
    other = ref("other.py", "c = 3\n" * 60)
    for window in range(600, 4000, 20):  # the smallest window that fits two of the three
        result = Thread().turn("which?", [active, edited, other], window=window, output=100)
        if len(result.resent) == 2:
            break
    assert result.resent == ["file:///ws/active.py", "file:///ws/edited.py"]
    assert result.plan.section("files").dropped[0].item == "file other.py"
    assert [c["file_id"] for c in contexts_in(result.messages)] == ["active.py", "edited.py"]
    assert result.plan.total <= result.plan.limit


def test_only_the_latest_context_of_a_file_is_used():
    thread = Thread()
    for version in range(1, 5):
        thread.turn(f"v{version}", [ref("a.py", f"x = {version}\n", version)])
    result = thread.turn("final", [ref("a.py", "x = 4\n", 4)])
    assert [c["content"] for c in contexts_in(result.messages)] == ["x = 4\n"]


def test_over_budget_sends_nothing_and_says_why():
    result = Thread().turn("explain " * 2000, [ref("a.py", "x")], window=1000, output=200)
    assert result.messages == [] and result.new_contexts == []
    assert "Too large to send" in result.over_budget and "message" in result.over_budget


def test_optional_fragment_is_the_last_thing_dropped():
    thread = Thread()
    roomy = thread.turn("hi", [])
    assert roomy.messages[0].content.endswith("Be brief.")
    assert [m.role for m in roomy.messages] == ["system", "user"]


def test_roles_alternate_after_merging():
    merged = merge_roles([ChatMessage("system", "s"), ChatMessage("user", "ctx"), ChatMessage("user", "q"),
                          ChatMessage("assistant", "a"), ChatMessage("assistant", "b")])
    assert [(m.role, m.content) for m in merged] == [("system", "s"), ("user", "ctx\n\nq"), ("assistant", "a\n\nb")]
