"""Editors often quit without waiting for the reply to `shutdown`, or die outright. The server
must then exit promptly and quietly: no traceback, no error in its log."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import clean_env, until


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def start(tmp_path):
    log = tmp_path / "margin.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "margin.lsp.main"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=clean_env(MARGIN_LOG_FILE=str(log),
                                              MARGIN_DEFAULTS_BASE_URL="http://127.0.0.1:9/v1"),
    )
    process.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"processId": None, "rootUri": None, "capabilities": {}}}))
    process.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    process.stdin.flush()
    header = process.stdout.readline()  # wait for the initialize reply to start arriving
    assert header.startswith(b"Content-Length")
    return process, log


@pytest.mark.parametrize("repeat", range(3))
def test_client_that_quits_during_shutdown(tmp_path, repeat):
    process, log = start(tmp_path)
    process.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None}))
    process.stdin.flush()
    process.stdout.close()  # the reply to shutdown has nowhere to go
    process.stdin.close()
    assert process.wait(timeout=20) == 0  # exited, quietly and cleanly
    stderr = process.stderr.read().decode()
    text = log.read_text()
    assert "Traceback" not in stderr + text and "ERROR" not in text, text + stderr


def test_client_that_dies_without_shutdown(tmp_path):
    process, log = start(tmp_path)
    process.stdout.close()
    process.stdin.close()
    assert process.wait(timeout=20) == 0  # exited, quietly and cleanly
    text = log.read_text()
    assert "Traceback" not in text and "ERROR" not in text, text


async def test_editor_that_dies_mid_request(tmp_path, fake):
    """The editor dies while a chat waits on the model: the server drops the model call and
    exits quietly; the thread is as it was, and the next session chats on."""
    from tests.e2e.lsp_client import margin_client, request
    from tests.fakes.fake_openai import hang

    db = str(tmp_path / "threads.db")
    log = tmp_path / "margin.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "margin.lsp.main"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=clean_env(MARGIN_LOG_FILE=str(log), MARGIN_DATABASE=db,
                                              MARGIN_DEFAULTS_BASE_URL=fake.base_url,
                                              MARGIN_DEFAULTS_TOKENIZER="tiktoken:o200k_base"))
    fake.script(hang(120))
    process.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"processId": None, "rootUri": "file:///ws", "capabilities": {}}}))
    process.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    process.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "margin/chat",
                               "params": {"message": "A question the editor never sees answered"}}))
    process.stdin.flush()
    await until(lambda: len(fake.requests) == 1)  # the model is being asked
    process.stdout.close()
    process.stdin.close()
    assert process.wait(timeout=20) == 0  # exited, quietly and cleanly
    await until(lambda: fake.disconnects)  # the model call was dropped, not left hanging
    text = log.read_text()
    stderr = process.stderr.read().decode()
    assert "Traceback" not in stderr + text and "ERROR" not in text, text + stderr
    async with margin_client(env={"MARGIN_DATABASE": db, "MARGIN_DEFAULTS_BASE_URL": fake.base_url,
                                  "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base"}) as client:
        assert (await request(client, "margin/history", {}))["messages"] == []
        assert (await request(client, "margin/chat", {"message": "Hello again"}))["reply"] == "ok"
