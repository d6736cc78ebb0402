"""A model's answer read as the agent's action, by each protocol: every call offered and well
formed runs, everything else is named back to the model, nothing is dropped without a word."""

from __future__ import annotations

import json

import pytest

from margin.core.agent import tools
from margin.core.agent.actions import check_args, described_call, read_answer
from margin.core.llm import ToolCall

READ_MAIN = {"tool": "read", "args": {"path": "main.py"}}


def only_call(read):
    assert not read.rejected, read.rejected
    (call,) = read.calls
    return call.tool.name, call.args


def test_native_calls_run_in_order_with_the_backends_ids():
    read = read_answer("native", "Let me look.", [ToolCall("c1", "read", '{"path": "a.py", "start": 3}'),
                                                  ToolCall("c2", "search", '{"query": "parse"}')])
    assert [(c.id, c.tool.name, c.args) for c in read.calls] == [
        ("c1", "read", {"path": "a.py", "start": 3}), ("c2", "search", {"query": "parse"})]
    assert read.text == "Let me look." and read.final is None


def test_a_native_answer_without_calls_is_final_unless_it_describes_one():
    assert read_answer("native", "The parser lives in parse.py.").final == "The parser lives in parse.py."
    for protocol in ("native", "json", "text"):  # an empty answer is told, never taken as the end
        empty = read_answer(protocol, "  \n")
        assert [r.kind for r in empty.rejected] == ["empty"] and empty.final is None
    described = read_answer("native", 'I will use the read tool on main.py: {"path": "main.py"}')
    assert [r.kind for r in described.rejected] == ["described"] and described.final is None
    assert "call it" in described.rejected[0].told


def test_the_json_protocol_reads_the_whole_answer_as_one_action():
    assert only_call(read_answer("json", json.dumps(READ_MAIN))) == ("read", {"path": "main.py"})
    finished = read_answer("json", json.dumps({"tool": "finish", "args": {"answer": "Done: tests pass."}}))
    assert finished.final == "Done: tests pass."


@pytest.mark.parametrize("answer", [
    "I'll read it.\n```json\n" + json.dumps(READ_MAIN) + "\n```",
    "```\n" + json.dumps({"name": "read", "arguments": {"path": "main.py"}}) + "\n```",
    "<tool_call>\n" + json.dumps({"name": "read", "arguments": json.dumps({"path": "main.py"})}) + "\n</tool_call>",
    "<function=read>\n<parameter=path>\nmain.py\n</parameter>\n</function>",
    "<tool_call>\n<function=read>\n<parameter=path>\nmain.py\n</parameter>\n</function>\n</tool_call>",
    '<function=read>{"path": "main.py"}</function>',
    json.dumps(READ_MAIN),
])
def test_the_text_protocol_finds_the_action_as_small_models_write_it(answer):
    assert only_call(read_answer("text", answer)) == ("read", {"path": "main.py"})


def test_code_in_a_fence_is_not_an_action_and_the_words_around_one_are_kept():
    read = read_answer("text", "Here is the fix:\n```python\nx = 1\n```\n" + "```json\n" + json.dumps(READ_MAIN) + "\n```")
    assert only_call(read) == ("read", {"path": "main.py"})
    assert read.text == "Here is the fix:\n```python\nx = 1\n```"
    assert read_answer("text", "```python\nprint('hi')\n```").final == "```python\nprint('hi')\n```"


def test_what_cannot_run_is_named_to_the_model():
    unknown = read_answer("text", '```json\n{"tool": "delete", "args": {"path": "a.py"}}\n```')
    assert [r.kind for r in unknown.rejected] == ["unknown tool"] and "read, list, search" in unknown.rejected[0].told
    broken = read_answer("text", '```json\n{"tool": "read", "args": {"path": "a.py"}\n```')
    assert [r.kind for r in broken.rejected] == ["malformed"] and broken.final is None
    native_broken = read_answer("native", "", [ToolCall("c1", "read", '{"path": ')])
    assert [r.kind for r in native_broken.rejected] == ["malformed"]
    wrong = read_answer("json", json.dumps({"tool": "read", "args": {"file": "a.py"}}))
    assert [r.kind for r in wrong.rejected] == ["bad arguments"]
    assert wrong.rejected[0].told == "read takes path, start, end, not 'file'."
    unclosed = read_answer("text", "<tool_call>\nread main.py\n</tool_call>")
    assert [r.kind for r in unclosed.rejected] == ["malformed"]


def test_one_action_an_answer_by_text_and_the_second_is_told_not_dropped():
    two = "```json\n" + json.dumps(READ_MAIN) + "\n```\n```json\n" + json.dumps({"tool": "run", "args": {"command": "pytest"}}) + "\n```"
    read = read_answer("text", two)
    assert [c.tool.name for c in read.calls] == ["read"]
    assert [r.kind for r in read.rejected] == ["one at a time"] and "run did not" in read.rejected[0].told


def test_only_offered_tools_are_called():
    read = read_answer("json", json.dumps({"tool": "run", "args": {"command": "rm -rf /"}}), tools=(tools.READ, tools.FINISH))
    assert not read.calls and [r.kind for r in read.rejected] == ["unknown tool"]


def test_arguments_are_checked_and_small_models_obvious_slips_taken():
    assert check_args(tools.READ, {"path": "a.py", "start": "12"}) == ({"path": "a.py", "start": 12}, None)
    assert check_args(tools.SEARCH, {"query": 42}) == ({"query": "42"}, None)
    for args, problem in [({"path": "a.py", "start": 0}, "read's start is a whole number of at least 1, not 0."),
                          ({"path": "a.py", "start": True}, "read's start is a whole number of at least 1, not true."),
                          ({"path": ["a.py"]}, 'read\'s path is text, not ["a.py"].'),
                          ({}, "read needs 'path'."), ("a.py", "The arguments of read are a JSON object: {path, start, end}.")]:
        assert check_args(tools.READ, args) == ({}, problem)


def test_described_calls_are_told_apart_from_answers():
    offered = tools.BY_NAME
    for text in ["I will call the search tool with the query parser.", 'read("main.py")', "Using `edit` tool now.",
                 'Next: {"path": "src/app.py", "start": 10}']:
        assert described_call(text, offered), text
    for text in ["I read the file and the bug is on line 3.", "Run the tests with pytest.", "The dict is {'a': 1}.",
                 "The function search(items) returns the index."]:
        assert not described_call(text, offered), text


def test_a_json_action_cut_short_is_malformed_and_numbers_are_bounded():
    cut = read_answer("json", '{\n    "tool": "read",\n    "args": {"path": "read", "start": 1, "end": 100000000')
    assert [r.kind for r in cut.rejected] == ["malformed"] and cut.final is None
    huge = read_answer("json", json.dumps({"tool": "read", "args": {"path": "a.py", "end": 10**12}}))
    assert [r.kind for r in huge.rejected] == ["bad arguments"]
    schema = tools.action_schema()
    read_args = next(b for b in schema["oneOf"] if b["properties"]["tool"]["const"] == "read")["properties"]["args"]
    assert read_args["properties"]["end"]["maximum"] == tools.MAX_LINE and read_args["additionalProperties"] is False
