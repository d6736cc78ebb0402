"""The search for model servers on loopback ports, against fakes listening on real ports."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from margin.adapters.local_scan import find_local_servers
from tests.fakes.fake_ollama import FakeOllama
from tests.fakes.fake_openai import FakeBackend


def dead_port() -> int:
    """A loopback port nothing listens on (bound for a moment by this test, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_ollama_is_found_with_its_version_and_models_and_asked_only_plain_gets():
    with FakeOllama(["qwen2.5-coder:1.5b", "llama3.2:1b"]) as ollama:
        (found,) = await find_local_servers([ollama.port])
    assert (found.kind, found.version, found.models) == ("Ollama", "0.12.6", ("qwen2.5-coder:1.5b", "llama3.2:1b"))
    assert found.base_url == ollama.base_url
    assert {method for method, _, _ in ollama.seen} == {"GET"}
    assert not any("authorization" in headers or "cookie" in headers for _, _, headers in ollama.seen)


@pytest.mark.parametrize(("kind", "props", "models", "get_json"), [
    ("llama.cpp", {"default_generation_settings": {"n_ctx": 4096}}, [{"id": "m.gguf", "owned_by": "llamacpp"}], {}),
    ("vLLM", None, [{"id": "Qwen/Qwen2.5-Coder-7B", "owned_by": "vllm", "max_model_len": 32768}],
     {"/version": {"version": "0.11.0"}}),
    ("LM Studio", None, [{"id": "qwen2.5-7b-instruct", "object": "model"}],
     {"/api/v0/models": {"object": "list", "data": [{"id": "qwen2.5-7b-instruct", "state": "loaded"}]}}),
    ("OpenAI-compatible", None, [{"id": "jan-v1-4b"}], {}),
])
async def test_each_kind_of_server_is_recognised_from_what_it_answers(kind, props, models, get_json):
    with FakeBackend(props=props, models=models) as server:
        server.get_json.update(get_json)
        (found,) = await find_local_servers([server.port])
    assert (found.kind, found.models) == (kind, (models[0]["id"],))


async def test_a_port_where_nothing_listens_is_skipped_and_the_others_found_in_port_order():
    dead = dead_port()
    with FakeOllama() as ollama, FakeBackend(props={"n_ctx": 2048}, models=[{"id": "m"}]) as llama:
        found = await find_local_servers([dead, llama.port, ollama.port])
    assert [(s.kind, s.port) for s in found] == [("llama.cpp", llama.port), ("Ollama", ollama.port)]


async def test_a_web_server_that_is_not_a_model_server_is_not_reported():
    with FakeBackend() as server:  # 404 for everything asked
        assert await find_local_servers([server.port]) == []


async def test_a_redirect_is_not_followed():
    with FakeOllama() as elsewhere:
        class Redirect(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(307)
                self.send_header("Location", elsewhere.base_url + "/models")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        redirecting = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
        thread = threading.Thread(target=redirecting.serve_forever, daemon=True)
        thread.start()
        try:
            found = await find_local_servers([redirecting.server_address[1]])
        finally:
            redirecting.shutdown()
            redirecting.server_close()
        assert found == [] and elsewhere.seen == []


async def test_only_loopback_hosts_may_be_searched():
    with pytest.raises(ValueError, match="only loopback"):
        await find_local_servers([80], hosts=["192.168.1.1"])
