"""The OpenAI-compatible provider against the scriptable fake backend over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest

from margin.adapters.openai_http import OpenAICompatibleProvider, error_from_body, server_root
from margin.core.fim import FimReply, FimRequest
from margin.core.llm import (
    BackendHTTPError,
    BackendTimeout,
    BackendUnreachable,
    ChatMessage,
    ChatRequest,
    ContextTooLarge,
    MalformedResponse,
    MalformedStream,
    NotSupported,
    ProviderError,
    Usage,
)
from tests.conftest import until
from tests.fakes.fake_openai import FakeBackend, hang, hang_up, raw, reply, sse_lines, status, stream

REQUEST = ChatRequest(
    messages=[ChatMessage("system", "be brief"), ChatMessage("user", "hi")],
    max_tokens=32,
    temperature=0.1,
    model="local-model",
)


@pytest.fixture
def fake():
    with FakeBackend() as backend:
        yield backend


@pytest.fixture
async def provider(fake):
    p = OpenAICompatibleProvider(fake.base_url, timeout_s=2.0)
    yield p
    await p.aclose()


async def collect(provider, request=REQUEST):
    return [delta async for delta in provider.stream(request)]


async def test_complete_asks_for_a_stream_and_returns_the_joined_reply_and_usage(fake, provider):
    fake.script(reply("Hello there.", usage={"prompt_tokens": 17, "completion_tokens": 3}))
    result = await provider.complete(REQUEST)
    assert result.content == "Hello there."
    assert result.finish_reason == "stop"
    assert result.usage.prompt_tokens == 17 and result.usage.completion_tokens == 3
    sent = fake.requests[0]
    assert sent["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert sent["model"] == "local-model" and sent["max_tokens"] == 32
    # streamed, so that a caller who stops waiting stops the generation (llama.cpp runs an
    # abandoned non-streamed request to its end)
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["temperature"] == 0.1
    assert "authorization" not in fake.headers[0]


async def test_stream_yields_text_in_order_then_finish_and_usage(fake, provider):
    fake.script(reply("The quick brown fox", chunk_size=5, usage={"prompt_tokens": 9, "completion_tokens": 4}))
    deltas = await collect(provider)
    assert "".join(d.text for d in deltas) == "The quick brown fox"
    assert len([d for d in deltas if d.text]) == 4
    assert any(d.finish_reason == "stop" for d in deltas)
    assert deltas[-1].usage is not None and deltas[-1].usage.prompt_tokens == 9
    assert fake.requests[0]["stream"] is True
    assert fake.requests[0]["stream_options"] == {"include_usage": True}


async def test_streamed_requests_reuse_one_connection(fake, provider):
    """Request overhead (#24): the body after `[DONE]` is read, so the connection goes back to the
    pool rather than being closed (a new TCP connection a request)."""
    accepted = []
    process = fake._server.process_request
    fake._server.process_request = lambda request, address: (accepted.append(address), process(request, address))
    for n in range(3):
        fake.script(reply(f"Reply {n}.", chunk_size=4))
        assert "".join(d.text for d in await collect(provider)) == f"Reply {n}."
    assert len(accepted) == 1


async def test_a_body_left_open_after_done_is_not_waited_for():
    async def body():
        yield b'data: {"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
        await asyncio.sleep(30)

    transport = httpx.MockTransport(lambda request: httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=body()))
    p = OpenAICompatibleProvider("http://backend.test/v1", timeout_s=60.0, transport=transport)
    try:
        async with asyncio.timeout(5):
            deltas = await collect(p)
    finally:
        await p.aclose()
    assert [(d.text, d.finish_reason) for d in deltas] == [("Hi", "stop")]


async def test_api_key_is_sent_as_bearer_token(fake):
    p = OpenAICompatibleProvider(fake.base_url, timeout_s=2.0, api_key="sk-test-123")
    try:
        await p.complete(REQUEST)
    finally:
        await p.aclose()
    assert fake.headers[0]["authorization"] == "Bearer sk-test-123"


async def test_a_redirect_is_never_followed_so_the_key_stays_with_the_server_it_was_sent_to(fake):
    with FakeBackend() as elsewhere:
        fake.script(raw("", code=307, headers={"Location": f"{elsewhere.base_url}/chat/completions"}))
        p = OpenAICompatibleProvider(fake.base_url, timeout_s=2.0, api_key="sk-test-123")
        try:
            with pytest.raises(ProviderError):
                await p.complete(REQUEST)
        finally:
            await p.aclose()
    assert elsewhere.seen == []


async def test_reasoning_models_get_max_completion_tokens_and_no_temperature(fake, provider):
    await provider.complete(ChatRequest([ChatMessage("user", "x")], max_tokens=50, temperature=0.3, model="gpt-5-mini"))
    sent = fake.requests[0]
    assert sent["max_completion_tokens"] == 50
    assert "max_tokens" not in sent and "temperature" not in sent


async def test_response_format_is_passed_through(fake, provider):
    schema = {"type": "json_schema", "json_schema": {"name": "ops", "schema": {"type": "object"}}}
    await provider.complete(ChatRequest([ChatMessage("user", "x")], 5, 0.0, response_format=schema))
    assert fake.requests[0]["response_format"] == schema


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("streaming", [False, True])
async def test_unreachable_backend(streaming):
    base = f"http://127.0.0.1:{free_port()}/v1"
    p = OpenAICompatibleProvider(base, timeout_s=2.0)
    try:
        with pytest.raises(BackendUnreachable) as caught:
            await (collect(p) if streaming else p.complete(REQUEST))
    finally:
        await p.aclose()
    assert base in str(caught.value) and "Start the model server" in str(caught.value)
    assert caught.value.kind == "unreachable"


@pytest.mark.parametrize("streaming", [False, True])
async def test_timeout_when_backend_never_answers(fake, streaming):
    fake.script(hang(5))
    p = OpenAICompatibleProvider(fake.base_url, timeout_s=0.3)
    try:
        with pytest.raises(BackendTimeout) as caught:
            await (collect(p) if streaming else p.complete(REQUEST))
    finally:
        await p.aclose()
    assert caught.value.timeout_s == 0.3 and "timeoutS" in str(caught.value)


async def test_non_streamed_deadline_is_total_not_per_read(fake):
    # Bytes trickle in (each gap under the timeout), but the whole answer takes longer.
    fake.script(reply("x", delay_s=0.5))
    p = OpenAICompatibleProvider(fake.base_url, timeout_s=0.3)
    try:
        with pytest.raises(BackendTimeout):
            await p.complete(REQUEST)
    finally:
        await p.aclose()


async def test_stream_that_keeps_arriving_is_not_cut_by_timeout(fake):
    fake.script(stream(["a", "b", "c", "d", "e", "f"], chunk_delay_s=0.1))
    p = OpenAICompatibleProvider(fake.base_url, timeout_s=0.35)
    try:
        deltas = await collect(p)
    finally:
        await p.aclose()
    assert "".join(d.text for d in deltas) == "abcdef"


async def test_stalled_stream_times_out(fake):
    fake.script(stream(["a", "b"], chunk_delay_s=1.0))
    p = OpenAICompatibleProvider(fake.base_url, timeout_s=0.3)
    try:
        with pytest.raises(BackendTimeout) as caught:
            await collect(p)
    finally:
        await p.aclose()
    assert "stopped sending" in str(caught.value)


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("code,advice", [(401, "API key"), (404, "baseUrl"), (429, "rate"), (500, "failed"), (422, "settings")])
async def test_http_status_errors(fake, provider, streaming, code, advice):
    fake.script(status(code, {"error": {"message": f"upstream says {code}", "type": "x"}}))
    with pytest.raises(BackendHTTPError) as caught:
        await (collect(provider) if streaming else provider.complete(REQUEST))
    assert type(caught.value) is BackendHTTPError
    assert caught.value.status == code
    assert f"HTTP {code}: upstream says {code}" in str(caught.value) and advice in str(caught.value)


LLAMA_CPP_TOO_LARGE = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                                 "type": "exceed_context_size_error", "n_prompt_tokens": 5123, "n_ctx": 4096}}
OPENAI_TOO_LARGE = {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.",
                              "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
VLLM_TOO_LARGE = {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4500 in the messages, 500 in the completion). Please reduce the length of the messages or completion.",
                  "type": "BadRequestError", "param": None, "code": 400}
VLLM_NEW_TOO_LARGE = {"error": {"message": "'max_tokens' or 'max_completion_tokens' is too large: 500. This model's maximum context length is 4096 tokens and your request has 3700 input tokens (500 > 4096 - 3700).",
                                "type": "BadRequestError", "code": 400}}
MISTRAL_TOO_LARGE = {"object": "error", "message": "Prompt contains 40012 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
                     "type": "invalid_request_message_error", "code": "3051"}


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("body,prompt,window", [
    (LLAMA_CPP_TOO_LARGE, 5123, 4096),
    (OPENAI_TOO_LARGE, 130512, 128000),
    (VLLM_TOO_LARGE, 4500, 4096),
    (VLLM_NEW_TOO_LARGE, 3700, 4096),
    (MISTRAL_TOO_LARGE, 40012, 32768),
])
async def test_context_too_large_is_recognised_with_sizes(fake, provider, streaming, body, prompt, window):
    fake.script(status(400, body))
    with pytest.raises(ContextTooLarge) as caught:
        await (collect(provider) if streaming else provider.complete(REQUEST))
    error = caught.value
    assert (error.prompt_tokens, error.context_window, error.status) == (prompt, window, 400)
    assert f"the prompt is {prompt} tokens" in str(error) and f"window is {window} tokens" in str(error)


def test_context_too_large_without_sizes_says_so():
    error = error_from_body(400, {"error": {"message": "context length exceeded"}}, "http://x/v1")
    assert isinstance(error, ContextTooLarge)
    assert error.prompt_tokens is None and "unknown number of tokens" in str(error)


async def test_broken_json_body_is_malformed_response(fake, provider):
    fake.script(raw('{"choices": [{"message": {"content": "hi"'))
    with pytest.raises(MalformedResponse) as caught:
        await provider.complete(REQUEST)
    assert type(caught.value) is MalformedResponse and "not an OpenAI-compatible" in str(caught.value)


async def test_wrong_shape_body_is_malformed_response(fake, provider):
    fake.script(raw(json.dumps({"result": "hi"})))
    with pytest.raises(MalformedResponse):
        await provider.complete(REQUEST)


async def test_stream_chunk_that_is_not_json_is_malformed_stream(fake, provider):
    good = json.dumps({"choices": [{"index": 0, "delta": {"content": "he"}, "finish_reason": None}]})
    fake.script(sse_lines([good, '{"choices": [{"delta": {"content": "llo"']))
    with pytest.raises(MalformedStream) as caught:
        await collect(provider)
    assert "not JSON" in str(caught.value)


async def test_stream_cut_mid_body_is_malformed_stream(fake, provider):
    fake.script(stream(["one ", "two ", "three"], cut_after=2))
    received = []
    with pytest.raises(MalformedStream) as caught:
        async for delta in provider.stream(REQUEST):
            received.append(delta.text)
    assert "".join(received) == "one two "
    assert "cut the connection" in str(caught.value)


async def test_stream_ending_cleanly_without_finishing_is_malformed_stream(fake, provider):
    fake.script(stream(["partial"], finish_reason=None, send_done=False))
    with pytest.raises(MalformedStream) as caught:
        await collect(provider)
    assert "ended before the reply was complete" in str(caught.value)


async def test_error_object_inside_stream_is_typed(fake, provider):
    fake.script(sse_lines([json.dumps(LLAMA_CPP_TOO_LARGE)]))
    with pytest.raises(ContextTooLarge) as caught:
        await collect(provider)
    assert caught.value.prompt_tokens == 5123


async def test_next_request_works_after_a_failure(fake, provider):
    fake.script(stream(["x"], cut_after=0), reply("fine"))
    with pytest.raises(MalformedStream):
        await collect(provider)
    assert "".join(d.text for d in await collect(provider)) == "fine"


async def test_backend_that_ignores_stream_flag_still_streams_one_piece(fake, provider):
    fake.script(raw(json.dumps({"choices": [{"message": {"content": "whole"}, "finish_reason": "stop"}]})))
    deltas = await collect(provider)
    assert [d.text for d in deltas] == ["whole"] and deltas[0].finish_reason == "stop"


def test_server_root_strips_api_prefix():
    assert server_root("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080"
    assert server_root("http://h/proxy/v1/") == "http://h/proxy"
    assert server_root("https://api.example.com/openai") == "https://api.example.com/openai"


async def test_probe_reads_llama_cpp_props():
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 4096}},
                     models=[{"id": "gemma", "owned_by": "llamacpp"}]) as fake:
        p = OpenAICompatibleProvider(fake.base_url, timeout_s=2)
        info = await p.probe()
        await p.aclose()
    assert info.reachable and info.kind == "llama.cpp"
    assert info.context_window == 4096 and "props" in info.context_window_source
    assert info.models == ("gemma",)


async def test_probe_reads_vllm_max_model_len_for_the_configured_model():
    with FakeBackend(models=[{"id": "other", "max_model_len": 2048}, {"id": "mine", "max_model_len": 32768}]) as fake:
        p = OpenAICompatibleProvider(fake.base_url, timeout_s=2)
        info = await p.probe(model="mine")
        await p.aclose()
    assert info.kind == "vllm" and info.context_window == 32768


async def test_probe_of_plain_openai_compatible_server_reports_no_window():
    with FakeBackend(models=[{"id": "m"}]) as fake:
        p = OpenAICompatibleProvider(fake.base_url, timeout_s=2)
        info = await p.probe()
        await p.aclose()
    assert info.reachable and info.kind == "openai-compatible" and info.context_window is None


async def test_probe_of_nothing_reports_unreachable():
    p = OpenAICompatibleProvider(f"http://127.0.0.1:{free_port()}/v1", timeout_s=2)
    info = await p.probe()
    await p.aclose()
    assert not info.reachable and not info.timed_out and "Nothing answers" in info.error


async def test_probe_reports_auth_failure_as_reachable_with_error():
    with FakeBackend() as fake:
        fake.models = None
        p = OpenAICompatibleProvider(fake.base_url, timeout_s=2)
        info = await p.probe()
        await p.aclose()
    assert info.reachable and "HTTP 404" in info.error


def timing_out(error: type[httpx.TimeoutException]):
    """A transport on which every request fails with `error`, and the requests it saw."""
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        raise error("timed out", request=request)

    return httpx.MockTransport(handle), seen


@pytest.mark.parametrize("error", [httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout])
async def test_probe_without_an_answer_in_time_is_reachable_but_busy_after_two_tries(error):
    transport, seen = timing_out(error)
    p = OpenAICompatibleProvider("http://busy.test/v1", timeout_s=30, transport=transport,
                                 probe_timeout_s=0.5)
    info = await p.probe()
    await p.aclose()
    assert info.reachable and info.timed_out and info.kind is None and info.context_window is None
    assert info.error.startswith("The backend at http://busy.test/v1 is busy: it accepted the "
                                 "connection but did not answer within 0.5 s, twice")
    assert sorted(seen) == ["/props", "/props", "/v1/models", "/v1/models"]


async def test_probe_that_times_out_connecting_is_unreachable_and_says_so():
    transport, seen = timing_out(httpx.ConnectTimeout)
    p = OpenAICompatibleProvider("http://dropped.test/v1", timeout_s=2, transport=transport)
    info = await p.probe()
    await p.aclose()
    assert not info.reachable and info.timed_out
    assert info.error.startswith("Timed out connecting to http://dropped.test/v1 after 2 s, twice")
    assert "refused" not in info.error and len(seen) == 4


async def test_probe_timeout_is_the_profile_timeout_when_that_is_shorter():
    transport, _ = timing_out(httpx.ReadTimeout)
    p = OpenAICompatibleProvider("http://busy.test/v1", timeout_s=1.5, transport=transport)
    info = await p.probe()
    await p.aclose()
    assert "within 1.5 s" in info.error


async def test_probe_where_only_props_is_slow_is_retried_and_then_complete():
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 4096}},
                     models=[{"id": "gemma", "owned_by": "llamacpp"}]) as fake:
        fake.slow_gets(10, times=1, paths=("/props",))  # only /props is late, and only once
        p = OpenAICompatibleProvider(fake.base_url, timeout_s=2, probe_timeout_s=0.2)
        info = await p.probe()
        await p.aclose()
        gets = sorted(fake.gets)
    assert info.reachable and not info.timed_out and info.error is None
    assert info.kind == "llama.cpp" and info.context_window == 4096
    assert gets == ["/props", "/props", "/v1/models", "/v1/models"]


async def test_an_observer_sees_each_request_exactly_as_sent(fake):
    seen = []
    p = OpenAICompatibleProvider(fake.base_url, timeout_s=2.0, api_key="sk-secret",
                                 on_request=lambda url, body: seen.append((url, body)))
    try:
        fake.script(reply("one"), reply("two"))
        await p.complete(REQUEST)
        await collect(p)
    finally:
        await p.aclose()
    assert [url for url, _ in seen] == [f"{fake.base_url}/chat/completions"] * 2
    assert [body for _, body in seen] == fake.requests  # the very bodies the server received
    assert "sk-secret" not in repr(seen)  # the key travels in a header, never in what is shown


def fim(route, **settings):
    return FimRequest(route, "f(", "\n", max_tokens=8, **settings)


async def test_fill_reaches_each_routes_endpoint_and_tells_unsupported_from_failed(fake):
    seen: list[tuple[str, dict]] = []
    provider = OpenAICompatibleProvider(fake.base_url, timeout_s=10, on_request=lambda url, body: seen.append((url, body)))
    fake.routes["/infill"] = [raw(json.dumps({"content": "x)", "timings": {"prompt_n": 3}, "stop_type": "eos",
                                              "tokens_evaluated": 3, "tokens_predicted": 1})),
                              status(501, {"error": {"code": 501, "type": "not_supported_error",
                                                     "message": "Infill is not supported by this model"}})]
    fake.routes["/v1/completions"] = [status(500, {"error": {"message": "boom"}})]
    try:
        assert await provider.fill(fim("infill")) == FimReply("x)", "stop", Usage(3, 1))
        sent = {"input_prefix": "f(", "input_suffix": "\n", "prompt": "", "n_predict": 8, "stream": True}
        assert fake.posts[0] == ("/infill", sent)  # at the server's root; streamed: see complete()
        assert seen[0] == (f"{server_root(fake.base_url)}/infill", sent)
        with pytest.raises(NotSupported, match="does not support"):
            await provider.fill(fim("infill"))
        with pytest.raises(BackendHTTPError) as failed:
            await provider.fill(fim("raw_fim"))
        assert not isinstance(failed.value, NotSupported) and failed.value.status == 500
        with pytest.raises(NotSupported, match="no fim/completions endpoint"):
            await provider.fill(fim("mistral_fim"))
        assert [path for path, _ in fake.posts] == ["/infill", "/infill", "/v1/completions", "/v1/fim/completions"]
    finally:
        await provider.aclose()


@pytest.mark.parametrize("answer", [{"content": 3}, {"choices": ["a"]}, {"choices": [{"text": ["a"]}]}, [1]])
async def test_an_answer_of_the_wrong_shape_is_malformed(fake, provider, answer):
    fake.routes["/infill"] = [raw(json.dumps(answer))]
    fake.routes["/v1/completions"] = [raw(json.dumps(answer))]
    route = "infill" if "content" in answer else "completions_suffix"
    with pytest.raises(MalformedResponse, match="not an OpenAI-compatible"):
        await provider.fill(fim(route))


LLAMA_INFILL_EVENTS = [  # llama.cpp's own stream (/infill, /completion), as it sends it
    {"index": 0, "content": "\n", "tokens": [107], "stop": False, "id_slot": -1, "tokens_predicted": 1},
    {"index": 0, "content": "    return", "tokens": [2060], "stop": False, "id_slot": -1, "tokens_predicted": 2},
    {"index": 0, "content": "", "tokens": [], "id_slot": 3, "stop": True, "tokens_predicted": 2,
     "tokens_evaluated": 8, "stop_type": "limit", "timings": {"prompt_n": 8, "cache_n": 0}},
]
OPENAI_COMPLETIONS_EVENTS = [  # llama.cpp's /v1/completions stream
    {"choices": [{"text": "a ", "index": 0, "logprobs": None, "finish_reason": None}], "object": "text_completion"},
    {"choices": [{"text": "+ b", "index": 0, "logprobs": None, "finish_reason": None}], "object": "text_completion"},
    {"choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": "length"}], "object": "text_completion",
     "usage": {"completion_tokens": 2, "prompt_tokens": 8, "total_tokens": 10}, "timings": {"prompt_n": 8}},
]
MISTRAL_FIM_EVENTS = [  # Mistral's /fim/completions stream: chat-shaped chunks
    {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                               "finish_reason": None}]},
    {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "a * b"},
                                                               "finish_reason": None}]},
    {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": ""},
                                                               "finish_reason": "stop"}],
     "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}},
]


@pytest.mark.parametrize("route, events, reply", [
    ("infill", LLAMA_INFILL_EVENTS, FimReply("\n    return", "length", Usage(8, 2))),
    ("completions_suffix", OPENAI_COMPLETIONS_EVENTS, FimReply("a + b", "length", Usage(8, 2))),
    ("mistral_fim", MISTRAL_FIM_EVENTS, FimReply("a * b", "stop", Usage(12, 3))),
])
async def test_fill_streams_and_joins_each_shape_into_its_reply(fake, provider, route, events, reply):
    path = {"infill": "/infill", "completions_suffix": "/v1/completions", "mistral_fim": "/v1/fim/completions"}[route]
    fake.routes[path] = [sse_lines([json.dumps(e) for e in events] + ["[DONE]"])]
    assert await provider.fill(fim(route)) == reply
    assert [p for p, _ in fake.posts] == [path] and fake.posts[0][1]["stream"] is True


@pytest.mark.parametrize("events", [LLAMA_INFILL_EVENTS[:2], OPENAI_COMPLETIONS_EVENTS[:2], MISTRAL_FIM_EVENTS[:2]])
async def test_a_streamed_answer_that_never_finishes_is_malformed_not_a_short_answer(fake, provider, events):
    fake.routes["/v1/completions"] = [sse_lines([json.dumps(e) for e in events])]
    with pytest.raises(MalformedStream, match="ended before the answer was complete"):
        await provider.fill(fim("completions_suffix"))


async def test_an_error_event_in_a_streamed_answer_is_its_typed_error(fake, provider):
    fake.routes["/v1/completions"] = [sse_lines([json.dumps(OPENAI_COMPLETIONS_EVENTS[0]), json.dumps(
        {"error": {"code": 400, "type": "exceed_context_size_error", "message": "too large",
                   "n_prompt_tokens": 5000, "n_ctx": 4096}})])]
    with pytest.raises(ContextTooLarge):
        await provider.fill(fim("completions_suffix"))


@pytest.mark.parametrize("call", ["complete", "fill"])
async def test_a_timed_out_call_closes_its_connection(fake, call):
    """The timeout (timeoutS) closes the request, which is what stops a streamed generation."""
    fake.script(hang(30))
    fake.routes["/v1/completions"] = [hang(30)]
    provider = OpenAICompatibleProvider(fake.base_url, timeout_s=0.5)
    try:
        with pytest.raises(BackendTimeout, match="did not answer within 0.5 s"):
            await (provider.complete(REQUEST) if call == "complete" else provider.fill(fim("raw_fim")))
    finally:
        await provider.aclose()
    await until(lambda: fake.disconnects)
    assert [path for path, _ in fake.disconnects] == ["/v1/chat/completions" if call == "complete" else "/v1/completions"]


# --- tool calls -------------------------------------------------------------------------------

TOOL = {"type": "function", "function": {"name": "recall", "parameters": {"type": "object", "properties": {}}}}


async def test_streamed_tool_calls_are_joined_from_their_pieces(fake, provider):
    from margin.core.llm import ToolCall, ToolCalls
    from tests.fakes.fake_openai import tool_calls

    fake.script(tool_calls(("recall", '{"pointer": "[t1 a.py]"}'), ("recall", '{"pointer": "[t2 ops]"}'),
                           content="Looking.", ids=["abc", "def"]))
    request = ChatRequest([ChatMessage("user", "hi")], 32, 0.0, tools=(TOOL,), tool_choice="auto")
    deltas = await collect(provider, request)
    calls = ToolCalls()
    for delta in deltas:
        calls.add(delta.tool_calls)
    assert calls.calls() == (ToolCall("abc", "recall", '{"pointer": "[t1 a.py]"}'),
                             ToolCall("def", "recall", '{"pointer": "[t2 ops]"}'))
    assert "".join(d.text for d in deltas) == "Looking." and [d.finish_reason for d in deltas if d.finish_reason] == ["tool_calls"]
    assert fake.requests[0]["tools"] == [TOOL] and fake.requests[0]["tool_choice"] == "auto"


async def test_tool_calls_and_answers_are_sent_in_openai_shape(fake, provider):
    from margin.core.llm import ToolCall

    call = ToolCall("c1", "recall", '{"pointer": "[t1 a.py]"}')
    messages = [ChatMessage("user", "hi"), ChatMessage("assistant", "", (call,)),
                ChatMessage("tool", "the content", tool_call_id="c1")]
    await provider.complete(ChatRequest(messages, 32, 0.0, tools=(TOOL,), tool_choice="none"))
    sent = fake.requests[0]
    assert sent["messages"][1] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "recall", "arguments": '{"pointer": "[t1 a.py]"}'}}]}
    assert sent["messages"][2] == {"role": "tool", "content": "the content", "tool_call_id": "c1"}
    assert sent["tool_choice"] == "none"


async def test_a_whole_reply_with_tool_calls_given_as_objects_or_without_ids(fake, provider):
    from margin.core.llm import ToolCall

    body = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "recall", "arguments": {"pointer": "[t1 a.py]"}}}]}}]}
    fake.script(raw(json.dumps(body)))
    answer = await provider.complete(REQUEST)
    assert answer.tool_calls == (ToolCall("call_0", "recall", '{"pointer": "[t1 a.py]"}'),)


async def test_streamed_pieces_without_an_index_take_their_place(fake, provider):
    from margin.core.llm import ToolCalls

    piece = {"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "x", "function": {"name": "recall",
                                                                                     "arguments": "{}"}}]},
                          "finish_reason": "tool_calls"}]}
    fake.script(sse_lines([json.dumps(piece), "[DONE]"]))
    calls = ToolCalls()
    for delta in await collect(provider):
        calls.add(delta.tool_calls)
    assert [(c.id, c.name, c.arguments) for c in calls.calls()] == [("x", "recall", "{}")]


async def test_a_connection_dropped_before_any_answer_is_tried_once_more_on_a_new_one(fake, provider):
    """The second request goes out on the kept-alive connection of the first; the server closes it
    without a word (llama.cpp does after 5 s idle, and a request sent just then meets a closed
    connection). It is sent again, once, on a new connection, and the user sees the answer."""
    fake.script(reply("one"), hang_up(), reply("two"))
    assert (await provider.complete(REQUEST)).content == "one"
    assert (await provider.complete(REQUEST)).content == "two"
    assert len(fake.requests) == 3


async def test_a_server_that_keeps_hanging_up_is_reported_after_one_more_try(fake, provider):
    fake.script(hang_up(), hang_up(), reply("never sent"))
    with pytest.raises(MalformedResponse) as caught:
        await provider.complete(REQUEST)
    assert "closed the connection before replying (RemoteProtocolError)" in str(caught.value)
    assert not isinstance(caught.value, MalformedStream)
    assert len(fake.requests) == 2


async def test_an_answer_cut_after_it_began_is_not_sent_again(fake, provider):
    fake.script(stream(["x"], cut_after=0), reply("a second generation"))
    with pytest.raises(MalformedStream):
        await provider.complete(REQUEST)
    assert len(fake.requests) == 1


async def test_a_fill_request_dropped_before_any_answer_is_tried_once_more(fake, provider):
    fake.routes["/v1/completions"] = [hang_up(), raw(json.dumps({"choices": [{"text": "b)"}]}))]
    assert (await provider.fill(fim("completions_suffix"))).text == "b)"
    assert [path for path, _ in fake.posts] == ["/v1/completions"] * 2


def endless(piece: str, chunk_delay_s: float = 0.0):
    """A server that never ends its reply: the same piece for ever, no finish, no [DONE]."""
    import itertools

    from tests.fakes.fake_openai import Step

    return Step("stream", chunks=itertools.repeat(piece), finish_reason=None, send_done=False,  # type: ignore[arg-type]
                chunk_delay_s=chunk_delay_s)


async def test_a_reply_that_never_ends_is_stopped_at_its_size_cap(fake):
    """Fast and for ever: stopped once it passes what its max_tokens could take, memory bounded."""
    from margin.adapters.stream_limits import byte_cap as stream_byte_cap

    fake.script(endless("x" * 200))
    provider = OpenAICompatibleProvider(fake.base_url, timeout_s=30)
    try:
        received = 0
        with pytest.raises(MalformedStream, match="went past 1088 KB") as stopped:
            async for delta in provider.stream(REQUEST):
                received += len(delta.text)
    finally:
        await provider.aclose()
    assert received <= stream_byte_cap(REQUEST.max_tokens) and "maxOutputTokens" in str(stopped.value)


async def test_a_reply_that_trickles_for_ever_is_stopped_at_its_deadline(fake):
    """Slow enough never to stall past timeoutS between chunks, and never done: stopped after
    timeoutS plus 2 s a token the request allows."""
    import time

    fake.script(endless("y", chunk_delay_s=0.1))
    provider = OpenAICompatibleProvider(fake.base_url, timeout_s=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(BackendTimeout, match=r"still arriving after 2\.5 s \(timeoutS plus 2 s for each of 1 tokens\)"):
            await collect(provider, ChatRequest(messages=REQUEST.messages, max_tokens=1, temperature=0))
    finally:
        await provider.aclose()
    assert time.monotonic() - started >= 2.5


async def test_a_fill_answer_that_never_ends_is_stopped_at_its_size_cap(fake):
    fake.routes["/infill"] = [endless("z" * 200)]
    provider = OpenAICompatibleProvider(fake.base_url, timeout_s=30)
    try:
        with pytest.raises(MalformedStream, match="went past"):
            await provider.fill(fim("infill"))
    finally:
        await provider.aclose()
