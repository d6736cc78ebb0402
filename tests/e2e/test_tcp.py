"""`margin-lsp --tcp HOST:PORT`: the same server over a TCP socket, on loopback unless
`--allow-remote` is given with a token every client must present. The tests bind 0.0.0.0 and
connect over loopback only: no test sends traffic off this machine."""

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


TOKEN = "t0ken-" + "9" * 40


def start(host: str, port: int, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "margin.lsp.main", "--tcp", f"{host}:{port}", *args],
                            env=clean_env(MARGIN_DEFAULTS_BASE_URL="http://127.0.0.1:9/v1", **env),
                            stderr=subprocess.PIPE)


def connect(process: subprocess.Popen, port: int) -> socket.socket:
    deadline = time.monotonic() + 20
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "margin-lsp did not listen"
            time.sleep(0.1)


def initialize(options=None) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": options}}


def serves_lsp(sock: socket.socket, stream, options=None) -> list[dict]:
    """Initialize, open a file and see it in margin/status; the window/showMessage notices sent."""
    send(sock, initialize(options))
    reply = receive(stream)
    assert reply["result"]["serverInfo"]["name"] == "margin"
    send(sock, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
    send(sock, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": "file:///t.py", "languageId": "python", "version": 7, "text": "x = 1\n"}}})
    send(sock, {"jsonrpc": "2.0", "id": 2, "method": "margin/status", "params": {}})
    notices = []
    while (status := receive(stream)).get("id") != 2:
        if status.get("method") == "window/showMessage":
            notices.append(status["params"])
    assert status["result"]["files"][0]["version"] == 7
    return notices


def stop(process: subprocess.Popen) -> str:
    process.terminate()
    process.wait(timeout=10)
    return process.stderr.read().decode()


def test_tcp_on_loopback_makes_a_token_only_the_user_can_read_and_serves_the_client_that_presents_it(tmp_path):
    """Any local process (another user's, a web page's `fetch()`) can reach a loopback port: with
    no token given, one is made and written to a file only the user can read; a client without it,
    and an HTTP request whose body would be the right `initialize`, are refused."""
    import stat

    port = free_port()
    token_file = tmp_path / "run" / "margin.token"
    process = start("127.0.0.1", port, "--token-file", str(token_file))
    try:
        sock = connect(process, port)
        token = token_file.read_text().strip()
        assert len(token) == 64 and stat.S_IMODE(token_file.stat().st_mode) == 0o600
        with sock, sock.makefile("rb") as stream:
            send(sock, initialize({"chat": {"baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": "AWS_SECRET_ACCESS_KEY"}}))
            assert receive(stream)["error"]["code"] == -32600 and stream.read() == b""
        body = json.dumps(initialize({"tcpToken": token})).encode()
        web = connect(process, port)
        with web, web.makefile("rb") as stream:
            web.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            assert receive(stream)["error"]["code"] == -32600 and stream.read() == b""
        assert process.poll() is None
        sock = connect(process, port)
        with sock, sock.makefile("rb") as stream:
            serves_lsp(sock, stream, {"tcpToken": token})
    finally:
        log = stop(process)
    assert f"the token clients present is in {token_file}" in log and token not in log


def test_the_token_file_is_made_anew_never_one_left_by_someone_else(tmp_path):
    port = free_port()
    token_file = tmp_path / "margin.token"
    token_file.write_text("a token someone else chose\n")
    token_file.chmod(0o644)
    process = start("127.0.0.1", port, "--token-file", str(token_file))
    try:
        connect(process, port).close()
        assert token_file.read_text().strip() != "a token someone else chose"
        assert token_file.stat().st_mode & 0o077 == 0
    finally:
        stop(process)


def test_tcp_off_loopback_is_refused_without_allow_remote_and_a_token():
    refused = subprocess.run([sys.executable, "-m", "margin.lsp.main", "--tcp", f"0.0.0.0:{free_port()}"],
                             capture_output=True, text=True, env=clean_env(), timeout=30)
    assert refused.returncode == 2
    assert "Margin listens on loopback only (127.0.0.1, ::1, localhost)" in refused.stderr
    assert "add --allow-remote and set MARGIN_TCP_TOKEN" in refused.stderr
    no_token = subprocess.run([sys.executable, "-m", "margin.lsp.main", "--tcp", f"0.0.0.0:{free_port()}",
                               "--allow-remote"], capture_output=True, text=True, env=clean_env(), timeout=30)
    assert no_token.returncode == 2 and "set MARGIN_TCP_TOKEN to a secret of at least 16 characters" in no_token.stderr
    short = subprocess.run([sys.executable, "-m", "margin.lsp.main", "--tcp", f"0.0.0.0:{free_port()}",
                            "--allow-remote"], capture_output=True, text=True,
                           env=clean_env(MARGIN_TCP_TOKEN="short"), timeout=30)
    assert short.returncode == 2


def test_with_allow_remote_only_a_client_with_the_token_is_served():
    """Bound on every address, reached over loopback: no token, a wrong one, then the right one
    (taken out of the options before the settings read them)."""
    port = free_port()
    process = start("0.0.0.0", port, "--allow-remote", MARGIN_TCP_TOKEN=TOKEN)
    try:
        for options in (None, {"chat": {"model": "m"}}, {"tcpToken": TOKEN[:-1] + "8"}):
            sock = connect(process, port)
            with sock, sock.makefile("rb") as stream:
                send(sock, initialize(options))
                answer = receive(stream)
                assert answer["id"] == 1 and answer["error"]["code"] == -32600
                assert "its first message must be initialize with the token" in answer["error"]["message"]
                assert stream.read() == b""  # and closed
        assert process.poll() is None  # the server waits on for the right client
        sock = connect(process, port)
        with sock, sock.makefile("rb") as stream:
            notices = serves_lsp(sock, stream, {"margin": {"tcpToken": TOKEN, "chat": {"model": "m"}}})
            assert [n for n in notices if "invalid settings" in n["message"]] == []
            # A second editor while this one is served: closed at once.
            other = connect(process, port)
            with other:
                assert other.recv(1) == b""
    finally:
        log = stop(process)
    assert log.count("tcp connection refused") == 4
    assert TOKEN not in log and TOKEN[:-1] not in log


def test_a_token_set_for_loopback_is_required_there_too():
    """On a machine shared with other users, any of them can connect to a loopback port."""
    port = free_port()
    process = start("127.0.0.1", port, MARGIN_TCP_TOKEN=TOKEN)
    try:
        sock = connect(process, port)
        with sock, sock.makefile("rb") as stream:
            send(sock, initialize())
            assert receive(stream)["error"]["code"] == -32600
        sock = connect(process, port)
        with sock, sock.makefile("rb") as stream:
            serves_lsp(sock, stream, {"tcpToken": TOKEN})
    finally:
        stop(process)


def test_bad_tcp_address_is_a_usage_error():
    result = subprocess.run([sys.executable, "-m", "margin.lsp.main", "--tcp", "8080"],
                            capture_output=True, text=True, env=clean_env(), timeout=30)
    assert result.returncode == 2 and "expected HOST:PORT" in result.stderr
