"""A loopback HTTP proxy in front of a real model server that records every POST: its path, the
JSON body sent, the JSON answer and how long the server took. Used to read llama.cpp's
`timings.prompt_n` (prompt tokens it evaluated anew) for each completion Margin sends, and to
replay a recorded request directly against the server for comparison.

It forwards whole requests and answers: a streamed answer reaches the client at once, when the
server has finished it, and is recorded joined into the shape the same request gets unstreamed
(`joined_stream`), so `answer` reads alike either way.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import httpx


@dataclass
class Exchange:
    path: str
    body: dict[str, Any]
    answer: Any
    status: int
    seconds: float
    """from receiving the request to having the server's whole answer"""

    @property
    def prompt_n(self) -> int | None:
        timings = self.answer.get("timings") if isinstance(self.answer, dict) else None
        return timings.get("prompt_n") if isinstance(timings, dict) else None


class _Server(ThreadingHTTPServer):
    request_queue_size = 128
    """Margin counts many texts at once (one /tokenize each): the default backlog of 5 let the
    kernel drop connections under load, which the client saw as a server that hung up."""


def joined_stream(text: str) -> dict[str, Any]:
    """An SSE answer as one: its text joined (chat `delta.content`, completions `text`, llama.cpp's
    own `content`), in the unstreamed shape of its kind, with the last `usage` and `timings`."""
    events = [json.loads(line[5:]) for line in text.splitlines()
              if line.startswith("data:") and line[5:].strip() != "[DONE]"]
    pieces: list[str] = []
    answer: dict[str, Any] = {}
    finish, chat = None, False
    for event in events:
        answer.update({key: event[key] for key in ("usage", "timings", "model") if event.get(key)})
        if "choices" not in event:
            pieces.append(event.get("content") or "")
            continue
        for choice in event["choices"][:1]:
            chat = chat or "delta" in choice
            pieces.append((choice.get("delta") or {}).get("content") or choice.get("text") or "")
            finish = choice.get("finish_reason") or finish
    if events and all("choices" not in e for e in events):
        return {**events[-1], "content": "".join(pieces)}
    key = {"message": {"role": "assistant", "content": "".join(pieces)}} if chat else {"text": "".join(pieces)}
    return {**answer, "choices": [{"index": 0, "finish_reason": finish, **key}]}


class RecordingProxy:
    def __init__(self, target_root: str) -> None:
        """`target_root`: the server's root URL, e.g. http://127.0.0.1:8080 (no /v1)."""
        self.target_root = target_root.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=300)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                started = time.perf_counter()
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization")}
                response = proxy._client.request(method, proxy.target_root + self.path, content=raw, headers=headers)
                seconds = time.perf_counter() - started
                if method == "POST":
                    try:
                        answer: Any = (joined_stream(response.text)
                                       if response.headers.get("content-type", "").startswith("text/event-stream")
                                       else response.json())
                    except ValueError:
                        answer = None
                    with proxy._lock:
                        proxy.exchanges.append(Exchange(self.path.split("?", 1)[0], json.loads(raw or b"{}"),
                                                        answer, response.status_code, seconds))
                data = response.content
                self.send_response(response.status_code)
                self.send_header("Content-Type", response.headers.get("content-type", "application/json"))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._guarded("GET")

            def do_POST(self) -> None:
                self._guarded("POST")

            def _guarded(self, method: str) -> None:
                try:
                    self._forward(method)
                except Exception as error:  # shown, not swallowed: the client sees the connection close
                    sys.stderr.write(f"recording proxy: {method} {self.path} failed: {error!r}\n")
                    raise

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def posts(self, path: str) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if e.path == path]

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
