"""A scriptable OpenAI-compatible HTTP server on loopback, for deterministic backend cases.

    with FakeBackend() as fake:
        fake.script(reply("hello"), status(500, {"error": {"message": "boom"}}))
        ... point a profile's baseUrl at fake.base_url ...
        fake.requests   # every /chat/completions body received, in order
        fake.gets       # every GET path (probes), in order

Each `/chat/completions` request takes the next scripted step; with none left it gets
`fake.default` (a short "ok" reply). A `reply` answers in the mode the request asked for
(streamed as SSE when `stream: true`). `/props` and `/models` answer with `props` and `models`
(404 when None), so context-window detection can be tested too.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests import log_secrets


@dataclass
class Step:
    """What the fake does with one chat request."""

    kind: str
    content: str = ""
    chunks: list[str] = field(default_factory=list)
    finish_reason: str | None = "stop"
    status: int = 200
    body: Any = None
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    cut_after: int | None = None
    send_done: bool = True
    usage: dict[str, int] | None = None
    lines: list[str] = field(default_factory=list)
    content_type: str = "application/json"
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    """tool calls: (id, name, arguments)"""
    headers: dict[str, str] = field(default_factory=dict)
    """extra response headers (a redirect's Location)"""
    gate: threading.Event | None = None
    """when set, the answer waits until the test opens it (a condition, not a delay)"""


def reply(content: str, *, finish_reason: str = "stop", usage: dict[str, int] | None = None,
          chunk_size: int = 4, delay_s: float = 0.0, chunk_delay_s: float = 0.0) -> Step:
    """A normal reply; streamed in `chunk_size`-character pieces when the request streams."""
    log_secrets.secret(content)
    pieces = [content[i : i + chunk_size] for i in range(0, len(content), chunk_size)] or [""]
    return Step("reply", content=content, chunks=pieces, finish_reason=finish_reason,
                usage=usage, delay_s=delay_s, chunk_delay_s=chunk_delay_s)


def tool_calls(*calls: tuple[str, str], content: str = "", ids: list[str] | None = None) -> Step:
    """A reply that calls tools: `calls` are (name, arguments as JSON text), after `content`.
    Streamed as OpenAI does: each call's id and name first, then its arguments in pieces."""
    made = [((ids or [])[i] if ids and i < len(ids) else f"call_{i}", name, arguments)
            for i, (name, arguments) in enumerate(calls)]
    pieces = [content[i : i + 4] for i in range(0, len(content), 4)]
    return Step("reply", content=content, chunks=pieces, finish_reason="tool_calls", calls=made)


def stream(chunks: list[str], *, finish_reason: str | None = "stop", chunk_delay_s: float = 0.0,
           cut_after: int | None = None, send_done: bool = True,
           usage: dict[str, int] | None = None) -> Step:
    """An SSE stream of `chunks`. `cut_after=n` drops the connection after n chunks, mid-body;
    `finish_reason=None, send_done=False` ends the body cleanly but without finishing."""
    log_secrets.secret("".join(chunks))
    return Step("stream", chunks=chunks, finish_reason=finish_reason, chunk_delay_s=chunk_delay_s,
                cut_after=cut_after, send_done=send_done, usage=usage)


def status(code: int, body: Any = None) -> Step:
    """An HTTP error status with a JSON (dict) or raw (str) body."""
    return Step("status", status=code, body=body if body is not None else {"error": {"message": "error"}})


def raw(body: str, *, content_type: str = "application/json", code: int = 200,
        headers: dict[str, str] | None = None) -> Step:
    """A body sent as is (e.g. broken JSON), with any extra headers (e.g. a redirect's Location)."""
    return Step("raw", body=body, content_type=content_type, status=code, headers=headers or {})


def sse_lines(lines: list[str]) -> Step:
    """SSE `data:` payloads sent as is (e.g. a chunk that is not JSON)."""
    return Step("sse", lines=lines)


def hang_up() -> Step:
    """Read the request and close the connection without a word, as a server does that drops a
    kept-alive connection just as a request arrives on it."""
    return Step("hang", delay_s=0.0)


def hang(seconds: float) -> Step:
    """Accept the request and say nothing for `seconds`."""
    return Step("hang", delay_s=seconds)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    """socketserver's listen backlog is 5: a burst of new connections past it (fifty requests at
    once) has some reset by the kernel, where a real model server (llama.cpp, vLLM) queues them"""

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out or cancel drop the connection; that is what is being tested.
        pass


class FakeBackend:
    def __init__(self, *, props: dict[str, Any] | None = None,
                 models: list[dict[str, Any]] | None = None, port: int = 0) -> None:
        self.props = props
        self.models = models
        self.default: Step = reply("ok")
        self.requests: list[dict[str, Any]] = []
        self.gets: list[str] = []
        self.headers: list[dict[str, str]] = []
        """the headers of each /v1/chat/completions request"""
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        """(method, path, headers with lower-case names) of every request, whatever its path"""
        self.posts: list[tuple[str, dict[str, Any]]] = []
        """(path, JSON body) of every POST to another endpoint than /v1/chat/completions"""
        self.tokenize: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        """when set, POST /tokenize answers 200 with what it returns for the request's body (as
        llama.cpp's or vLLM's would)"""
        self.answers: dict[str, Callable[[dict[str, Any]], Step]] = {}
        """for other POST endpoints, by path: the answer to each request's JSON body, decided from
        it (a server's behaviour rather than a script); `routes` are asked first"""
        self.get_json: dict[str, Any] = {}
        """other GET endpoints, by path: answered 200 with this JSON"""
        self.routes: dict[str, list[Step]] = {}
        """scripted answers (`status` or `raw` steps) for other POST endpoints, by path; 404 when none"""
        self.disconnects: list[tuple[str, float]] = []
        """(path, time.monotonic()) of each hanging request whose client closed the connection"""
        self._steps: list[Step] = []
        self._get_delay_s = 0.0
        self._slow_gets_left: dict[str, int | None] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _QuietServer(("127.0.0.1", port), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    def slow_gets(self, seconds: float, *, times: int | None = None,
                  paths: tuple[str, ...] = ("/props", "/v1/models")) -> None:
        """Accept GETs of `paths` at once but answer only after `seconds`: each path's next
        `times` requests, or every one when `times` is None."""
        with self._lock:
            self._get_delay_s = seconds
            self._slow_gets_left = {path: times for path in paths}

    def _get_delay(self, path: str) -> float:
        with self._lock:
            self.gets.append(path)
            if path not in self._slow_gets_left:
                return 0.0
            left = self._slow_gets_left[path]
            if left is not None:
                if left <= 0:
                    return 0.0
                self._slow_gets_left[path] = left - 1
            return self._get_delay_s

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _next_step(self, body: dict[str, Any], headers: dict[str, str]) -> Step:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            return self._steps.pop(0) if self._steps else self.default

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go in separate writes: without this, the body waits for the
            # client's delayed ACK (~40 ms on every answer).
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _json(self, code: int, payload: Any) -> None:
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self, method: str) -> None:
                with fake._lock:
                    fake.seen.append((method, self.path.split("?", 1)[0],
                                      {k.lower(): v for k, v in self.headers.items()}))

            def do_GET(self) -> None:
                self._record("GET")
                path = self.path.split("?", 1)[0]
                delay = fake._get_delay(path)
                if delay:
                    fake._stopping.wait(delay)
                try:
                    self._answer_get(path)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped waiting

            def _answer_get(self, path: str) -> None:
                if path == "/props" and fake.props is not None:
                    self._json(200, fake.props)
                elif path == "/v1/models" and fake.models is not None:
                    self._json(200, {"object": "list", "data": fake.models})
                elif path in fake.get_json:
                    self._json(200, fake.get_json[path])
                elif path == "/health":
                    self._json(200, {"status": "ok"})
                else:
                    self._json(404, {"error": {"message": f"no {path}", "code": 404}})

            def do_POST(self) -> None:
                self._record("POST")
                length = int(self.headers.get("Content-Length") or 0)
                raw_body = self.rfile.read(length)
                path = self.path.split("?", 1)[0]
                if path != "/v1/chat/completions":
                    with fake._lock:
                        fake.posts.append((path, json.loads(raw_body or b"{}")))
                        steps = fake.routes.get(path)
                        step = steps.pop(0) if steps else None
                    if path == "/tokenize" and fake.tokenize is not None and step is None:
                        self._json(200, fake.tokenize(json.loads(raw_body or b"{}")))
                    elif step is None and path in fake.answers:
                        step = fake.answers[path](json.loads(raw_body or b"{}"))
                        getattr(self, f"_do_{step.kind}")(step, {})
                    elif step is None:
                        self._json(404, {"error": {"message": "not found"}})
                    else:
                        getattr(self, f"_do_{step.kind}")(step, {})
                    return
                body = json.loads(raw_body or b"{}")
                step = fake._next_step(body, {k.lower(): v for k, v in self.headers.items()})
                if step.delay_s and step.kind != "hang":
                    fake._stopping.wait(step.delay_s)
                if step.gate is not None:
                    step.gate.wait(60)
                handler: Callable[[Step, dict[str, Any]], None] = getattr(self, f"_do_{step.kind}")
                try:
                    handler(step, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away, as clients that cancel do

            def _do_hang(self, step: Step, body: dict[str, Any]) -> None:
                """Say nothing for the step's time, watching the connection: a client that gives
                up and closes it is recorded in `fake.disconnects` at once."""
                deadline = time.monotonic() + step.delay_s
                while time.monotonic() < deadline and not fake._stopping.is_set():
                    readable, _, _ = select.select([self.connection], [], [], 0.005)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        with fake._lock:
                            fake.disconnects.append((self.path.split("?", 1)[0], time.monotonic()))
                        break
                self.close_connection = True

            def _do_status(self, step: Step, body: dict[str, Any]) -> None:
                self._json(step.status, step.body)

            def _do_raw(self, step: Step, body: dict[str, Any]) -> None:
                data = step.body.encode()
                self.send_response(step.status)
                self.send_header("Content-Type", step.content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in step.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _do_reply(self, step: Step, body: dict[str, Any]) -> None:
                if body.get("stream"):
                    self._do_stream(step, body)
                    return
                usage = step.usage or {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
                self._json(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "model": body.get("model") or "fake",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": step.content, **({
                        "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                       for i, n, a in step.calls]} if step.calls else {})},
                                 "finish_reason": step.finish_reason}],
                    "usage": usage,
                })

            def _start_sse(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

            def _write_chunk(self, text: str) -> None:
                data = text.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _end_chunks(self) -> None:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _cut(self) -> None:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True

            def _do_stream(self, step: Step, body: dict[str, Any]) -> None:
                self._start_sse()

                def event(delta: dict[str, Any], finish: str | None) -> str:
                    return "data: " + json.dumps({
                        "id": "chatcmpl-fake", "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }) + "\n\n"

                self._write_chunk(event({"role": "assistant", "content": ""}, None))
                for index, piece in enumerate(step.chunks):
                    if step.cut_after is not None and index >= step.cut_after:
                        self._cut()
                        return
                    if step.chunk_delay_s:
                        time.sleep(step.chunk_delay_s)
                    self._write_chunk(event({"content": piece}, None))
                for index, (call_id, name, arguments) in enumerate(step.calls):
                    self._write_chunk(event({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                                             "function": {"name": name, "arguments": ""}}]}, None))
                    third = max(1, len(arguments) // 3)
                    for at in range(0, len(arguments), third):
                        self._write_chunk(event({"tool_calls": [{"index": index, "function": {
                            "arguments": arguments[at:at + third]}}]}, None))
                if step.finish_reason is not None:
                    self._write_chunk(event({}, step.finish_reason))
                    usage = step.usage or {"prompt_tokens": 10, "completion_tokens": len(step.chunks)}
                    self._write_chunk("data: " + json.dumps({"choices": [], "usage": usage}) + "\n\n")
                if step.send_done:
                    self._write_chunk("data: [DONE]\n\n")
                self._end_chunks()

            def _do_sse(self, step: Step, body: dict[str, Any]) -> None:
                self._start_sse()
                for line in step.lines:
                    self._write_chunk(f"data: {line}\n\n")
                self._end_chunks()

        return Handler
