"""The direct call (margin.evals.direct): each route's plain request, on the wire, against the
fake OpenAI-compatible server on loopback, and what is taken from each answer."""

from __future__ import annotations

import json

import pytest

from margin.evals.direct import HOLE, DirectClient, Endpoint, chat_answer
from tests.fakes.fake_openai import raw, reply, status


def endpoint(fake, model=None, key=None):
    return Endpoint(fake.base_url, model, key, temperature=0.0, max_tokens=64, timeout_s=30)


async def ask(fake, route, model=None, key=None, document=None):
    client = DirectClient(endpoint(fake, model, key))
    try:
        return await client.fill(route, "def f(:\n    return ", "\n\nprint(f())\n", document)
    finally:
        await client.aclose()


async def test_infill_asks_llama_cpp_at_its_root_with_the_whole_prefix_and_suffix(fake):
    fake.routes["/infill"] = [raw(json.dumps({"content": "1", "tokens_evaluated": 17}))]
    answer = await ask(fake, "infill")
    assert (answer.text, answer.prompt_tokens, answer.error) == ("1", 17, None)
    assert fake.posts == [("/infill", {"input_prefix": "def f(:\n    return ", "input_suffix": "\n\nprint(f())\n",
                                       "n_predict": 64, "temperature": 0.0, "stream": False})]


async def test_completions_with_suffix_and_with_the_familys_tokens(fake):
    fake.routes["/v1/completions"] = [
        raw(json.dumps({"choices": [{"text": "1"}], "usage": {"prompt_tokens": 9}})),
        raw(json.dumps({"choices": [{"text": "2"}], "usage": {"prompt_tokens": 12}}))]
    first = await ask(fake, "completions_suffix", model="some-model")
    second = await ask(fake, "raw_fim", model="qwen2.5-coder-1.5b")
    assert (first.text, first.prompt_tokens, second.text, second.prompt_tokens) == ("1", 9, "2", 12)
    assert fake.posts[0] == ("/v1/completions", {"model": "some-model", "prompt": "def f(:\n    return ",
                                                 "suffix": "\n\nprint(f())\n", "max_tokens": 64, "temperature": 0.0})
    sent = fake.posts[1][1]
    assert sent["prompt"] == "<|fim_prefix|>def f(:\n    return <|fim_suffix|>\n\nprint(f())\n<|fim_middle|>"
    assert "<|endoftext|>" in sent["stop"] and "suffix" not in sent


async def test_raw_fim_without_a_known_family_says_so_and_sends_nothing(fake):
    answer = await ask(fake, "raw_fim", model="gemma-3-270m")
    assert answer.text is None and "no fill-in-the-middle tokens known for model 'gemma-3-270m'" in answer.error
    assert fake.posts == []


async def test_mistral_fim_and_a_key_in_the_header(fake):
    fake.routes["/v1/fim/completions"] = [raw(json.dumps({"choices": [{"message": {"content": "3"}}]}))]
    answer = await ask(fake, "mistral_fim", model="codestral-latest", key="sk-direct")
    assert answer.text == "3" and answer.prompt_tokens is None
    path, headers = next((path, headers) for method, path, headers in fake.seen if method == "POST")
    assert path == "/v1/fim/completions" and headers["authorization"] == "Bearer sk-direct"


async def test_chat_marks_the_hole_in_the_editors_text_and_takes_the_fenced_code(fake):
    fake.script(reply("Here it is:\n```python\n    return 1\n```\nDone."))
    text = "def f():\n\nprint(f())\n"
    answer = await ask(fake, "chat", document=(text, 9))
    assert answer.text == "    return 1\n" and answer.prompt_tokens == 10
    message = fake.requests[0]["messages"][0]["content"]
    assert f"```python\ndef f():\n{HOLE}\nprint(f())\n\n```" in message and fake.requests[0]["temperature"] == 0.0


def test_a_chat_reply_without_a_fence_is_taken_whole():
    assert chat_answer("    return 1") == "    return 1"
    assert chat_answer("```\nx = 1\n") == "x = 1\n"  # cut off before its closing fence


@pytest.mark.parametrize("step", [status(500, {"error": {"message": "boom"}}), raw("not json"),
                                  raw(json.dumps({"choices": []}))])
async def test_a_failed_or_malformed_answer_is_no_answer_with_the_reason(fake, step):
    fake.script(step)
    answer = await ask(fake, "chat")
    assert answer.text is None and answer.error
