"""The agent's prompt per step: the newest results whole, older ones as pointers, tighter shapes
in a fixed order (results to pointers oldest first, then the oldest steps left out), both
protocols' message shapes, pointers found again, and a thread read back as it was stored."""

from __future__ import annotations

import json

from margin.core.agent import steps
from margin.core.agent.steps import Result, Step, StoredMessage, Task
from margin.core.llm import ToolCall


def step(number: int, text: str = "", call_id: str | None = None) -> Step:
    calls = (ToolCall(call_id, "read", '{"path":"a.py"}'),) if call_id else ()
    return Step(number, steps.action_text("read", {"path": "a.py"}) if not call_id else "",
                calls, (Result(number, text or f"result {number}", "read a.py", call_id),))


def test_the_newest_steps_are_whole_and_older_ones_pointers():
    entries = [Task("fix it"), step(1), step(2), step(3)]
    shape = steps.first_shape(entries)
    assert shape.pointed == {(1, 0)}
    shown = json.dumps([m.as_json() for m in steps.messages("json", "sys", entries, shape)])
    assert "Result [t1 read a.py] (not shown)" in shown and "result 1" not in shown
    assert "result 2" in shown and "result 3" in shown


def test_tighter_shapes_point_oldest_first_then_leave_out_the_oldest_steps():
    entries = [Task("t"), step(1), step(2), step(3)]
    shape = steps.first_shape(entries)
    seen = []
    while (shape := steps.tighter(entries, shape)) is not None:
        seen.append((sorted(shape.pointed), shape.left_out))
    assert seen == [([(1, 0), (2, 0)], 0), ([(1, 0), (2, 0), (3, 0)], 0),
                    ([(1, 0), (2, 0), (3, 0)], 1), ([(1, 0), (2, 0), (3, 0)], 2)]
    last = steps.messages("json", "sys", entries, steps.Shape({(1, 0), (2, 0), (3, 0)}, 2))
    assert "2 earlier steps are left out" in last[1].content and "[t3 read a.py]" in last[-1].content


def test_native_steps_answer_each_call_by_its_id_and_roles_alternate_otherwise():
    entries = [Task("t"), step(1, call_id="c1"), Step(2, "I will read it.", (), (Result(2, "You described…", "told"),))]
    native = steps.messages("native", "sys", entries, steps.first_shape(entries))
    assert [m.role for m in native] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert native[2].tool_calls[0].id == "c1" and native[3].tool_call_id == "c1"
    text = steps.messages("json", "sys", [Task("a"), Task("b", None)], steps.first_shape([]))
    assert [m.role for m in text] == ["system", "user"] and "Task: a\n\nTask: b" in text[1].content


def test_a_pointer_finds_its_result_and_a_stored_thread_reads_back_the_same():
    entries = [Task("fix it"), step(1, "the file"), step(2)]
    assert steps.find(entries, "[t1 read a.py]").text == "the file"
    assert steps.find(entries, "t1").text == "the file" and steps.find(entries, "[t9 read a.py]") is None
    stored = [StoredMessage("user", "fix it", None, {steps.AGENT: {"task": True}}, 3)]
    for entry in entries[1:]:
        answer, results = steps.stored_step(entry, {})
        stored.append(StoredMessage("assistant", entry.answer, None, answer, 5))
        stored += [StoredMessage("tool", text, steps.RESULT, meta, 4) for text, meta in results]
    stored.append(StoredMessage("assistant", "done", None, {steps.AGENT: {"final": True}}, 1))
    back = steps.entries_of(stored)
    assert back[0] == Task("fix it", "done")
    assert [(s.number, s.results[0].text) for s in back[1:]] == [(1, "the file"), (2, "result 2")]


def test_a_result_cut_to_its_share_ends_at_a_line_and_says_so():
    text = "".join(f"line {i}\n" for i in range(1000))
    cut = steps.cut_to(text, 4000, 400)
    assert len(cut) < len(text) / 5 and "cut to fit the context window" in cut
    assert cut.split("\n… cut")[0].endswith("\n")
    assert steps.label_for("run", {"command": "pytest  -q\n]x"}) == "run pytest -q )x"
