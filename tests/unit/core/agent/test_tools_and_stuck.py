"""The agent's tools as each protocol offers them (no `title` anywhere, within the token target
for all eight), and the rules that stop a stuck turn."""

from __future__ import annotations

import json

import pytest

from margin.core.agent import stuck, tools
from margin.core.agent.actions import read_answer
from margin.core.tokens.local import tiktoken_counter


def keys_of(node) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for value in node.values() for k in keys_of(value)}
    if isinstance(node, list):
        return {k for value in node for k in keys_of(value)}
    return set()


def test_eight_tools_each_with_a_flat_schema_and_no_titles():
    assert [t.name for t in tools.TOOLS] == ["read", "list", "search", "edit", "run", "diagnostics", "recall", "finish"]
    for offered in (tools.native(), tools.action_schema()):
        assert "title" not in keys_of(offered)
    for tool in tools.TOOLS:
        assert set(tool.required) <= set(tool.properties)
        assert {spec["type"] for spec in tool.properties.values()} <= {"string", "integer"}
    assert {t.name for t in tools.TOOLS if t.effect in ("changes", "runs")} == {"edit", "run"}


def test_all_eight_cost_at_most_700_tokens_in_every_shape():
    count = tiktoken_counter("o200k_base").count
    shapes = {"native": json.dumps(tools.native()), "json": json.dumps(tools.action_schema()),
              "text": tools.described()}
    costs = {name: count(text) for name, text in shapes.items()}
    assert all(cost <= 700 for cost in costs.values()), costs


def test_the_text_protocols_own_example_reads_as_an_action():
    example = tools.described().split("```json\n")[1].split("\n```")[0]
    read = read_answer("text", "```json\n" + example + "\n```")
    assert [(c.tool.name, c.args) for c in read.calls] == [("read", {"path": "main.py"})]


def test_the_same_call_with_the_same_result_is_told_then_stops_the_turn():
    watch = stuck.Watch()
    assert watch.after("read", {"path": "a.py"}, "x = 1\n", "[t1 read a.py]").verdict == "go on"
    assert watch.after("read", {"path": "b.py"}, "x = 1\n", "[t2 read b.py]").verdict == "go on"
    again = watch.after("read", {"path": "a.py"}, "x = 1\n", "[t3 read a.py]")
    assert (again.verdict, again.first) == ("repeated", "[t1 read a.py]")
    assert "[t1 read a.py]" in stuck.repeated_note("read", again.first)
    changed = watch.after("read", {"path": "a.py"}, "x = 2\n", "[t4 read a.py]")  # the file changed meanwhile
    assert changed.verdict == "go on"
    third = watch.after("read", {"path": "a.py"}, "x = 1\n", "[t5 read a.py]")
    assert third.verdict == "stop" and "three times" in third.why


def test_arguments_written_in_another_order_are_the_same_call():
    watch = stuck.Watch()
    watch.after("read", {"path": "a.py", "start": 1}, "r", "[t1]")
    assert watch.after("read", {"start": 1, "path": "a.py"}, "r", "[t2]").verdict == "repeated"


def test_steps_that_change_and_find_nothing_stop_the_turn():
    watch = stuck.Watch()
    for _ in range(stuck.STALL_STEPS - 1):
        assert watch.step_done(something_new=False).verdict == "go on"
    assert watch.step_done(something_new=True).verdict == "go on"  # the count starts again
    verdicts = [watch.step_done(something_new=False).verdict for _ in range(stuck.STALL_STEPS)]
    assert verdicts[-1] == "stop" and set(verdicts[:-1]) == {"go on"}


@pytest.mark.parametrize(("model", "size", "cap"), [
    ("gemma-3-270m-it-Q4_K_M.gguf", 0.27, 8), ("Qwen2.5-Coder-1.5B-Instruct", 1.5, 8), ("llama3.1:8b", 8, 20),
    ("qwen3-30b-a3b", 30, 20), ("Llama-3.2-3B-Instruct", 3, 8), ("gpt-5", None, 20), ("Mixtral-8x7B", None, 20),
    (None, None, 20)])
def test_the_step_cap_follows_the_models_size(model, size, cap):
    assert stuck.parameters_b(model) == size and stuck.step_cap(model) == cap
