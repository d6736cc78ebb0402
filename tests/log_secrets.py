"""Margin's logs never hold secrets: the text a test sends Margin (documents, chat messages and
instructions, the fake model's replies, the API key) is registered here by the test helpers, the
log of every Margin process the test starts is collected here (its stderr, and any log file it
was told to write), and the autouse fixture in tests/conftest.py fails the test if any of that
text turns up in those logs.

Only text long enough to be unambiguous is registered: each line of it, stripped, of at least
`MIN_LENGTH` characters, with some variety, and not made only of words Margin's own log
messages use (so a document that says `margin/chat request failed` is not a leak when the log
says so too). A leak is found whether the log holds the text as is, JSON-escaped or repr-escaped.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

MIN_LENGTH = 12
API_KEY_ENV = "FAKE_LLM_API_KEY"
"""the variable every test server's `apiKeyEnv` names (set by `tests.conftest.clean_env`)"""
API_KEY = f"sk-fake-{secrets.token_hex(16)}"
SECRET_FIELDS = frozenset({"message", "text", "instruction", "content", "match", "title"})
"""request params whose values are the user's own text"""

SERVER = Path(__file__).resolve().parents[1] / "server" / "margin"
_LOG_CALL = re.compile(r"\blog\.(?:debug|info|warning|error|exception|critical)\(\s*(f?\"[^\"]*\"|f?'[^']*')")
_WORDS = re.compile(r"[A-Za-z]+")


@lru_cache(maxsize=1)
def log_vocabulary() -> frozenset[str]:
    """Every word of Margin's own log messages, and of the LSP method names it logs."""
    words = {"margin", "textdocument", "didopen", "didchange", "didclose", "didsave", "workspace",
             "window", "initialize", "initialized", "shutdown", "exit", "file", "http", "https", "ws"}
    for path in SERVER.rglob("*.py"):
        for literal in _LOG_CALL.findall(path.read_text(encoding="utf-8")):
            words.update(w.lower() for w in _WORDS.findall(literal))
    return frozenset(words)


def candidates(text: str) -> set[str]:
    """The pieces of `text` that count as secret."""
    found = set()
    for piece in {text.strip(), *(line.strip() for line in text.splitlines())}:
        if len(piece) < MIN_LENGTH or len(set(piece)) < 5 or not any(c.isalpha() for c in piece):
            continue
        if all(w.lower() in log_vocabulary() for w in _WORDS.findall(piece)):
            continue
        if not any(c.isspace() for c in piece) and ("/" in piece or "\\" in piece):
            continue  # a path, URI or method name: metadata a log may carry
        found.add(piece)
    return found


@dataclass
class _Log:
    label: str
    text: bytearray = field(default_factory=bytearray)
    path: Path | None = None

    def read(self) -> str:
        if self.path is not None:
            return self.path.read_text(encoding="utf-8", errors="replace") if self.path.exists() else ""
        return self.text.decode("utf-8", errors="replace")


@dataclass
class _Test:
    secrets: set[str] = field(default_factory=lambda: {API_KEY})
    logs: list[_Log] = field(default_factory=list)
    made: list[Path] = field(default_factory=list)


_current = _Test()


def begin() -> None:
    global _current
    _current = _Test()


def secret(text: Any) -> None:
    """Register `text` (a string, or strings anywhere inside lists and dicts) as secret."""
    if isinstance(text, str):
        _current.secrets.update(candidates(text))
    elif isinstance(text, dict):
        for value in text.values():
            secret(value)
    elif isinstance(text, (list, tuple)):
        for value in text:
            secret(value)


def secret_params(params: Any) -> None:
    """Register the user's text in a request's params: the values of `SECRET_FIELDS`, at any depth."""
    if isinstance(params, dict):
        for key, value in params.items():
            if key in SECRET_FIELDS:
                secret(value)
            else:
                secret_params(value)
    elif isinstance(params, (list, tuple)):
        for value in params:
            secret_params(value)


def watch_file(path: str | Path) -> None:
    """A log file a Margin process of this test writes."""
    path = Path(path)
    if not any(log.path == path for log in _current.logs):
        _current.logs.append(_Log(str(path), path=path))


def new_log_file() -> str:
    """A fresh log file for a process whose stderr the test reads itself (the `margin` command);
    removed when the test ends."""
    handle, name = tempfile.mkstemp(prefix="margin-test-", suffix=".log")
    os.close(handle)
    watch_file(name)
    _current.made.append(Path(name))
    return name


def collect(stream: asyncio.StreamReader | None, label: str, forward: bool = True) -> asyncio.Future[None]:
    """Keep everything a server writes to `stream` (its stderr) until it closes, forwarding it
    to this process's stderr as pytest-lsp does (pytest shows it when a test fails). Await the
    result (`drain`) once the process has exited, so its last lines are kept too."""
    log = _Log(label)
    _current.logs.append(log)

    async def read() -> None:
        if stream is None:
            return
        while line := await stream.readline():
            log.text.extend(line)
            if forward:
                sys.stderr.buffer.write(line)

    return asyncio.ensure_future(read())


async def drain(reader: asyncio.Future[None], timeout: float = 30) -> None:
    """Wait for a collected stream to close (its process has exited)."""
    await asyncio.wait([reader], timeout=timeout)
    reader.cancel()


def _forms(piece: str) -> Iterable[str]:
    yield piece
    yield json.dumps(piece)[1:-1]
    yield json.dumps(piece, ensure_ascii=False)[1:-1]
    yield repr(piece)[1:-1]


def leaks() -> list[str]:
    """Where this test's secrets appear in its servers' logs: one line per leak found."""
    found = []
    logs = [(log.label, log.read()) for log in _current.logs]
    for piece in sorted(_current.secrets):
        for label, text in logs:
            at = next((text.find(form) for form in set(_forms(piece)) if form in text), -1)
            if at >= 0:
                start = text.rfind("\n", 0, at) + 1
                end = text.find("\n", at)
                line = text[start:end if end >= 0 else len(text)]
                shown = "the API key" if piece == API_KEY else repr(piece[:60])
                found.append(f"{shown} in {label}: {line[:300]}")
    return found


def end() -> list[str]:
    """The leaks of the test that ends; the registry starts empty for the next."""
    found = leaks()
    for path in _current.made:
        path.unlink(missing_ok=True)
    begin()
    return found
