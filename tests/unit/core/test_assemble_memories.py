"""Chat assembly with memories (seed 002 mapped to an editor): instructions required within their
cap, pinned memories in the system prompt, retrieved snippets packed by rank under the memory
share with borrowing both ways, and the truncation order history → summary → snippets → files →
memories."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.assemble import FileRef, assemble_chat
from margin.core.budget import Window
from margin.core.instructions import InstructionFile
from margin.core.sources.instructions import Rules
from margin.core.sources.snippets import Snippets
from margin.core.threads import NewMessage
from margin.core.tokens.counter import heuristic_count
from margin.core.vfs import VirtualFile
from tests.unit.core.test_assemble import Thread, chat_input, contexts_in, ref, stored

WINDOW, OUTPUT = 8000, 500


def snippet(name: str, lines: int, tag: str = "") -> FileRef:
    text = "".join(f"value_{tag}{i} = compute_{i}(value_{i - 1})\n" for i in range(lines))
    return FileRef(VirtualFile(f"file:///ws/{name}#L1-{lines}", "python", 0, text), f"{name} lines 1-{lines}")


def history(turns: int, words: int = 120) -> list:
    messages = []
    for n in range(turns):
        messages += [stored(NewMessage("user", f"question {n} " + "word " * words)),
                     stored(NewMessage("assistant", f"answer {n} " + "word " * words))]
    return messages


def assemble(history=(), files=(), **inputs):
    return assemble_chat(chat_input(history, "What now?", files, **inputs), heuristic_count,
                         Window(WINDOW, OUTPUT, "heuristic", False))


def section(result, name):
    return result.plan.section(name)


def test_with_room_unused_snippets_borrow_beyond_their_share():
    snippets = [snippet(f"s{i}.py", 40, str(i)) for i in range(6)]
    result = assemble(snippets=Snippets(snippets, 0.1))
    assert len(section(result, "snippets").kept) == 6  # 0.1 of the room would hold fewer
    assert sum(i.tokens for i in section(result, "snippets").kept) > 0.1 * result.plan.limit
    sent = [c["file_id"] for c in contexts_in(result.messages)]
    assert sent == [f"s{i}.py lines 1-40" for i in range(6)]  # most relevant first


def test_a_long_history_leaves_snippets_their_share_and_lends_nothing_more():
    snippets = [snippet(f"s{i}.py", 40, str(i)) for i in range(6)]
    result = assemble(history=history(60), snippets=Snippets(snippets, 0.3))
    kept = section(result, "snippets")
    room = result.plan.limit - sum(s.tokens for s in result.plan.sections if s.name in ("system", "message"))
    assert 0 < kept.tokens <= 0.3 * room
    assert [item.payload.file_id for item in kept.kept][::-1] == [f"s{i}.py lines 1-40" for i in range(len(kept.kept))]
    assert section(result, "history").dropped_items  # history gave way to the share …
    assert sum(i.tokens for i in section(result, "history").kept) > kept.tokens  # … and kept the rest
    dropped = section(result, "snippets").dropped
    assert dropped and all("memory share" in d.reason for d in dropped)


def test_under_pressure_snippets_go_before_files_and_memories_after_them():
    big = ref("big.py", "".join(f"line_{i} = {i}\n" for i in range(300)))
    snippets = [snippet(f"s{i}.py", 60, str(i)) for i in range(4)]
    result = assemble(files=[big], snippets=Snippets(snippets, 0.9), memories=["Use structlog.", "Deploy with Fly.io."])
    assert len(section(result, "files").kept) == 1 and len(section(result, "memories").kept) == 2
    assert len(section(result, "snippets").kept) < 4 and section(result, "snippets").dropped_items
    assert "- Use structlog.\n- Deploy with Fly.io." in result.messages[0].content


def test_instructions_are_required_and_report_what_their_cap_cut():
    rules = [InstructionFile("AGENTS.md", 1, text="Root rule."), InstructionFile("pkg/AGENTS.md", text="Pkg rule.")]
    result = assemble(history=history(80), instructions=Rules(rules, ["docs/AGENTS.md"]))
    report = result.plan.report().section("instructions")
    assert report.kept == 2 and [d.item for d in report.dropped] == ["docs/AGENTS.md"]
    system = result.messages[0].content
    assert system.index("Instructions from AGENTS.md:\nRoot rule.") < system.index("Instructions from pkg/AGENTS.md")
    assert section(result, "history").dropped_items  # history gave way; the rules did not


@settings(max_examples=30, deadline=None)
@given(turns=st.integers(0, 30), sizes=st.lists(st.integers(1, 120), max_size=8),
       share=st.floats(0, 0.9), memories=st.lists(st.text("abc ", min_size=1, max_size=40), max_size=4))
def test_never_over_the_limit_snippets_in_rank_order_and_retained_once_sent(turns, sizes, share, memories):
    thread = Thread()
    thread.messages = history(turns, 30)
    snippets = [snippet(f"s{i}.py", size, str(i)) for i, size in enumerate(sizes)]
    sent: set[str] = set()
    for _ in range(2):
        result = assemble_chat(chat_input(thread.messages, "Go on.", snippets=Snippets(snippets, share),
                                          memories=memories), heuristic_count, Window(WINDOW, OUTPUT, "heuristic", False))
        assert result.plan.total <= result.plan.limit
        shown = [item.payload.file_id for item in section(result, "snippets").kept][::-1]
        ranks = [next(i for i, s in enumerate(snippets) if s.file_id == name) for name in shown]
        assert ranks == sorted(ranks)
        assert not set(result.retained) & set(result.resent)
        assert set(result.resent) <= {s.file.uri for s in snippets}
        if sent & set(result.resent):  # sent again only when the history that held it was cut
            assert result.plan.section("history").dropped_items
        sent |= set(result.resent)
        thread.messages += [stored(m) for m in result.new_contexts]
