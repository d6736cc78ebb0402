"""In-process counts of prompts with tools and tool calls never fall short of what the model
sees: against mistral-common's own encoding of the same request for both Tekken files, and
against OpenAI's published recipe for counting function definitions (o200k, cl100k)."""

from __future__ import annotations

import os

import mistral_common
import pytest
from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.protocol.instruct.tool_calls import Function, FunctionCall, Tool
from mistral_common.protocol.instruct.tool_calls import ToolCall as MistralToolCall
from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

from margin.core.llm import ChatMessage, ToolCall
from margin.core.recall_tool import TOOL, TOOLS
from margin.core.tokens.assets import openai_encoding_args
from margin.core.tokens.local import _encoding, tekken_counter, tiktoken_counter

ARGUMENTS = '{"pointer": "[t12 parser.py]"}'
RECALLED = "[t12 parser.py]: exactly as shown in turn 12 (sha256 " + "ab" * 32 + ").\n\n" + \
    "".join(f"def f{i}(x):\n    return x * {i}  # ünïcode 😀\n" for i in range(40))


def conversation(calls: int) -> list[ChatMessage]:
    messages = [ChatMessage("system", "You are Margin, a coding assistant."),
                ChatMessage("user", "What did [t12 parser.py] define?")]
    for n in range(calls):
        call = ToolCall(f"call{n:05d}", "recall", ARGUMENTS)
        messages += [ChatMessage("assistant", "", (call,)), ChatMessage("tool", RECALLED, tool_call_id=call.id)]
    return messages


def mistral_request(messages: list[ChatMessage]) -> ChatCompletionRequest:
    function = TOOL["function"]
    tool = Tool(function=Function(name=function["name"], description=function["description"],
                                  parameters=function["parameters"]))
    converted = []
    for m in messages:
        if m.role == "system":
            converted.append(SystemMessage(content=m.content))
        elif m.role == "user":
            converted.append(UserMessage(content=m.content))
        elif m.role == "assistant":
            converted.append(AssistantMessage(content=m.content or None, tool_calls=[
                MistralToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=c.arguments))
                for c in m.tool_calls] or None))
        else:
            converted.append(ToolMessage(content=m.content, tool_call_id=m.tool_call_id))
    return ChatCompletionRequest(messages=converted, tools=[tool])


@pytest.mark.parametrize("name,version", [("tekken_240911", "v7"), ("tekken_240718", "v3")])
@pytest.mark.parametrize("calls", [0, 1, 3])
def test_tekken_counts_of_tool_prompts_are_never_short(name, version, calls):
    tokenizer = MistralTokenizer.from_file(os.path.join(os.path.dirname(mistral_common.__file__), "data", f"{name}.json"))
    messages = conversation(calls)
    real = len(tokenizer.encode_chat_completion(mistral_request(messages)).tokens)
    ours = tekken_counter(name, version).count_chat_now(messages, TOOLS)
    assert real <= ours <= real * 1.25 + 40  # never short, and not wildly over


def openai_function_tokens(encoding, tools: list[dict]) -> int:
    """OpenAI's published recipe (openai-cookbook, "How to count tokens with tiktoken",
    num_tokens_for_tools, gpt-4o constants)."""
    func_init, prop_init, prop_key, func_end = 7, 3, 3, 12
    total = 0
    for tool in tools:
        function = tool["function"]
        total += func_init + len(encoding.encode(f"{function['name']}:{function['description'].rstrip('.')}"))
        properties = function["parameters"]["properties"]
        if properties:
            total += prop_init
            for key, spec in properties.items():
                total += prop_key + len(encoding.encode(f"{key}:{spec['type']}:{spec.get('description', '').rstrip('.')}"))
    return total + func_end


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_openai_counts_allow_at_least_the_published_recipe_for_tools(encoding):
    counter = tiktoken_counter(encoding)
    plain = conversation(0)
    added = counter.count_chat_now(plain, TOOLS) - counter.count_chat_now(plain)
    assert added >= openai_function_tokens(_encoding(openai_encoding_args(encoding)), list(TOOLS))


def test_a_tool_call_and_its_answer_cost_at_least_their_text():
    counter = tiktoken_counter("o200k_base")
    one, two = (counter.count_chat_now(conversation(n), TOOLS) for n in (1, 2))
    assert two - one >= counter.count(RECALLED) + counter.count(ARGUMENTS)
