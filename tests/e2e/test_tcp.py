"""`margin-lsp --tcp HOST:PORT`: the same server over a TCP socket."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from tests.conftest import clean_env, free_port


def send(sock: socket.socket, message: dict) -> None:
    body = json.dumps(message).encode()
    sock.sendall(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)


def receive(stream) -> dict:
    length = None
    while True:
        line = stream.readline().decode().strip()
        if not line:
            break
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    return json.loads(stream.read(length))


def test_tcp_transport_serves_lsp():
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "margin.lsp.main", "--tcp", f"127.0.0.1:{port}"],
                               env=clean_env(MARGIN_DEFAULTS_BASE_URL="http://127.0.0.1:9/v1"),
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline, "margin-lsp did not listen"
                time.sleep(0.1)
        with sock, sock.makefile("rb") as stream:
            send(sock, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"processId": None, "rootUri": None, "capabilities": {}}})
            reply = receive(stream)
            assert reply["result"]["serverInfo"]["name"] == "margin"
            send(sock, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
            send(sock, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": "file:///t.py", "languageId": "python", "version": 7, "text": "x = 1\n"}}})
            send(sock, {"jsonrpc": "2.0", "id": 2, "method": "margin/status", "params": {}})
            while (status := receive(stream)).get("id") != 2:
                pass  # skip notifications such as window/showMessage
            assert status["result"]["files"][0]["version"] == 7
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_bad_tcp_address_is_a_usage_error():
    result = subprocess.run([sys.executable, "-m", "margin.lsp.main", "--tcp", "8080"],
                            capture_output=True, text=True, env=clean_env(), timeout=30)
    assert result.returncode == 2 and "expected HOST:PORT" in result.stderr
