"""Compact pointers (core/pointers.py, core/assemble.py): old content shown as `[t42 parser.py]`
in the prompt, never changed in storage, always resolvable to exactly what it stands for."""

from __future__ import annotations

import copy
import itertools
import random

from hypothesis import example, given, settings
from hypothesis import strategies as st

from margin.core import pointers
from margin.core.assemble import FileRef, assemble_chat
from margin.core.budget import Window
from margin.core.file_block import parse_file_blocks
from margin.core.sources.thread import Pointers
from margin.core.threads import FILE_CONTEXT, Message, NewMessage
from margin.core.tokens.local import tiktoken_counter
from margin.core.vfs import VirtualFile
from tests.unit.core.test_assemble import chat_input

count = tiktoken_counter("o200k_base").count
LEGEND = f"{pointers.LEGEND} {pointers.RECALL_BY_USER}"


class Session:
    """A thread as the chat service keeps it: each successful turn appends what it sent (new file
    contexts, the message, the reply with its ops); nothing stored is ever removed."""

    def __init__(self, files: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.ids = itertools.count(1)
        self.history: list[Message] = []
        self.texts = {f"src/m{i}.py": "".join(f"value_{i}_{n} = compute({n})\n" for n in range(40))
                      for i in range(files)}
        self.versions = dict.fromkeys(self.texts, 1)

    def store(self, new: NewMessage) -> Message:
        return Message(**new.__dict__, id=next(self.ids), thread_id="t", created_at=0.0)

    def refs(self) -> list[FileRef]:
        return [FileRef(VirtualFile(f"file:///ws/{name}", "python", self.versions[name], text), name)
                for name, text in self.texts.items()]

    def edit(self) -> None:
        name = self.rng.choice(sorted(self.texts))
        self.texts[name] += f"edited_{self.versions[name]} = True\n"
        self.versions[name] += 1

    edit_rate = 0.6

    def turn(self, window: int, output: int = 256):
        if self.rng.random() < self.edit_rate:
            self.edit()
        newest = f"question {len(self.history)}: what does value_{self.rng.randrange(9)} do?"
        before = copy.deepcopy(self.history)
        result = assemble_chat(chat_input(self.history, newest, self.refs(), optional=[("style", "Be brief.")],
                                          pointers=Pointers(LEGEND)), count, Window(window, output, "tiktoken:o200k_base", True))
        assert self.history == before  # assembling never changes what is stored
        if result.over_budget:
            return result
        long = self.rng.random() < 0.4
        reply = f"Reply {len(self.history)}: " + ("It computes the value. " * (60 if long else 3)).strip()
        meta = {"ops": [{"op": "replace", "targetFile": "src/m0.py", "match": "value_0_1 = compute(1)",
                         "content": "value_0_1 = compute(2)"}]} if self.rng.random() < 0.3 else {}
        self.history += [self.store(m) for m in result.new_contexts]
        self.history += [self.store(NewMessage("user", newest)), self.store(NewMessage("assistant", reply, meta=meta))]
        return result


def prompt_text(result) -> str:
    return "\n\n".join(m.content for m in result.messages)


def check(session: Session, result, window: int, output: int = 256) -> None:
    plan = result.plan
    assert plan.total <= plan.limit
    assert sum(count(m.content) + 4 for m in result.messages) + 3 <= window - output  # counted whole, OpenAI framing
    text = prompt_text(result)
    # The legend is there exactly when a pointer is.
    assert (LEGEND in result.messages[0].content) == bool(result.pointers)
    assert all(p in text for p in result.pointers)
    # Every pointer resolves to exactly the stored text it stands for: a file's snapshot, a
    # reply, or a reply's edit-ops, of the turn it names.
    turns = dict(zip((m.id for m in session.history), pointers.turn_numbers(session.history)))
    for ref in result.pointers:
        found = pointers.resolve(session.history, ref)
        assert found is not None, ref
        turn, label = ref[2:-1].split(" ", 1)
        assert turns[found.message.id] == int(turn), ref
        if label == pointers.OPS:
            assert found.message.role == "assistant" and found.content == pointers.ops_block(found.message.meta["ops"])
        elif label == pointers.REPLY:
            assert found.message.role == "assistant" and found.content == found.message.content
        else:
            assert found.message.kind == FILE_CONTEXT and found.content == found.message.content
            assert found.fingerprint == found.message.fingerprint
            assert parse_file_blocks(found.content)[0].file_id.endswith(label)
    # The newest snapshot of each file in the prompt is there whole, and no older one is.
    blocks = parse_file_blocks(text)
    assert len({b.file_id for b in blocks}) == len(blocks)
    for block in blocks:
        assert block.text == session.texts[block.file_id]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), window=st.sampled_from([4096, 8192, 16384]), files=st.integers(1, 8))
def test_a_long_session_never_overflows_and_every_pointer_resolves(seed, window, files):
    session = Session(files, seed)
    for _ in range(40):
        result = session.turn(window)
        if result.over_budget:
            continue
        check(session, result, window)


def test_masking_moves_in_batches_and_keeps_the_hot_window_whole():
    """In a window that holds everything: the replies and ops of the turns up to the masking line
    are pointers, those after it whole; the line moves MASK_BATCH turns at a time, and between
    moves each prompt starts with the whole of the one before (the backend's cache holds)."""
    session = Session(2, 7)
    session.edit_rate = 0.0
    previous, moves = None, []
    for n in range(1, 41):
        result = session.turn(131_072)
        line = pointers.first_mask_line(n)
        text = prompt_text(result)
        replies = [(turn, m) for turn, m in zip(pointers.turn_numbers(session.history[:-2]), session.history[:-2])
                   if m.role == "assistant"]
        for turn, reply in replies:
            long = count(reply.content) > pointers.LONG_REPLY_TOKENS
            masked = turn <= line and reply is not replies[-1][1]
            assert (f"[t{turn} reply]" in text) == (masked and long)
            assert (reply.content in text) == (not (masked and long))
            if reply.meta.get("ops"):
                assert (f"[t{turn} ops]" in text) == masked
        assert n - 1 - line >= min(n - 1, pointers.HOT_TURNS)  # the hot window is whole
        if previous is not None:
            if previous[0] == line:
                before = previous[1].messages[:-1]
                assert result.messages[:len(before) - 1] == before[:-1]  # all but the last merged message
            else:
                moves.append(n)
        previous = (line, result)
    assert len(moves) >= 3 and all(b - a == pointers.MASK_BATCH for a, b in itertools.pairwise(moves))


def test_masking_goes_further_before_any_turn_is_dropped():
    """In a small window the line moves on (more is masked) as far as it takes; turns are dropped
    only once everything that can be masked is."""
    session = Session(3, 11)
    session.edit_rate = 0.0
    for _ in range(40):
        result = session.turn(4096)
    history = result.plan.section("history")
    assert result.pointers and not history.dropped_items  # it all fits, masked
    many = Session(3, 11)
    many.edit_rate = 0.0
    for _ in range(120):
        result = many.turn(4096)
    dropped = result.plan.section("history").dropped_items
    assert dropped  # too long even masked: the oldest turns go …
    kept_text = prompt_text(result)
    turns = pointers.turn_numbers(many.history)
    kept_turns = {t for t, m in zip(turns, many.history) if m.role == "user" and m.content in kept_text}
    for turn, m in zip(turns, many.history):  # … and every kept turn but the hot ones is masked
        if m.role == "assistant" and turn in kept_turns and turn < max(kept_turns) - pointers.HOT_TURNS - pointers.MASK_BATCH:
            assert m.content not in kept_text or count(m.content) <= pointers.LONG_REPLY_TOKENS


def test_the_latest_reply_is_never_masked_however_long_and_with_its_ops():
    ops = [{"op": "replace", "target_file": "a.py", "target": "document", "content": "x = 1\n"}]
    long_reply = "word " * (pointers.LONG_REPLY_TOKENS * 3)

    def message(id_, role, content, meta=None):
        return Message(role=role, content=content, meta=meta or {}, id=id_, thread_id="t", created_at=0.0)

    history = [message(1, "user", "first"), message(2, "assistant", long_reply, {"ops": ops}),
               message(3, "user", "second"), message(4, "assistant", long_reply, {"ops": ops})]
    shown = pointers.show(history, count)
    older, latest = shown[1], shown[3]
    assert [p.pointer for p in older.parts] == ["[t1 reply]", "[t1 ops]"]  # an older one is
    assert [p.pointer for p in latest.parts] == [None, None]
    assert [p.text for p in latest.parts] == [long_reply, pointers.ops_block(ops)]


def test_show_after_a_fold_is_the_whole_show_less_the_folded_turns():
    """Request overhead (#24): the turns a summary folds are left out of `show` (no prompt shows
    them); what it shows of the turns after is exactly what the whole thread's `show` does."""
    session = Session(3, 5)
    for _ in range(30):
        session.turn(8192)
    whole = pointers.show(session.history, count)
    for after in (0, 1, 7, 16, 29, 30, 40):
        assert pointers.show(session.history, count, after=after) == [e for e in whole if e.turn > after]


def test_pointers_are_short_and_name_turn_and_file():
    assert pointers.pointer(42, "parser.py") == "[t42 parser.py]"
    assert count("[t42 parser.py]") <= 5 and count("[t42 ops]") <= 5 and count("[t300 reply]") <= 5
    assert count(LEGEND) < 100
    assert pointers.parse_pointer("[t42 parser.py]") == (42, "parser.py")
    assert pointers.parse_pointer("t7 ops") == (7, "ops")
    assert pointers.parse_pointer("parser.py") is None


def test_files_of_one_turn_with_the_same_name_are_told_apart_by_their_folders():
    def context(i: int, path: str) -> Message:
        return Message("user", f"File {path}", hidden=True, kind=FILE_CONTEXT, uri=f"file:///ws/{path}",
                       meta={"file_id": path}, id=i)

    labels = pointers.file_labels([context(1, "a/util.py"), context(2, "b/util.py"), context(3, "b/main.py")])
    assert labels == {1: "a/util.py", 2: "b/util.py", 3: "main.py"}


@given(st.lists(st.lists(st.sampled_from(["a", "b", "util.py", "x.py", ""]), min_size=1, max_size=4),
                min_size=1, max_size=8))
@example([["", ""], ["a", ""], ["a"]])
def test_a_file_label_is_the_shortest_tail_of_its_path_no_other_file_of_the_turn_shares(paths):
    """Several snippets of one file, files of one name in several folders, folders named like
    files: each label takes as many folders as it needs, and no more."""
    contexts = [Message("user", "x", hidden=True, kind=FILE_CONTEXT, meta={"file_id": "/".join(parts)}, id=i)
                for i, parts in enumerate(paths)]
    labels = pointers.file_labels(contexts)
    for i, parts in enumerate(paths):
        path = ("/".join(parts) or "file").rstrip("/")
        others = [("/".join(other) or "file").rstrip("/") for j, other in enumerate(paths) if j != i]

        def tail(text: str, depth: int) -> str:
            return "/".join(text.split("/")[-depth:])

        depth = labels[i].count("/") + 1
        assert labels[i] == tail(path, depth)
        assert depth == path.count("/") + 1 or all(tail(other, depth) != labels[i] for other in others)
        assert depth == 1 or any(tail(other, depth - 1) == tail(path, depth - 1) for other in others)
