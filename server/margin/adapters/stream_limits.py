"""The backstop against a model server that never ends a reply (adapters.openai_http): a stream
must be whole within timeoutS plus SECONDS_PER_TOKEN for each token its request allows, and hold
at most `byte_cap(max_tokens)` bytes; an answer read whole, at most that many bytes too. Past
either, the request is closed with an error that says which limit and which setting."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx

from margin.core.llm import BackendTimeout, MalformedStream, ProviderError

log = logging.getLogger(__name__)

SECONDS_PER_TOKEN = 2.0
"""A stream may take, beyond timeoutS, this long for each token its request allows: the slowest
model on a CPU (half a token a second) still finishes; a server that never ends a reply is
stopped."""
BASE_BYTES = 1 << 20
BYTES_PER_TOKEN = 2048
"""An event stream's bytes, at most: a megabyte, and 2 KB for each token allowed (an event is a
few hundred bytes of JSON around a token)."""


def byte_cap(max_tokens: int) -> int:
    return BASE_BYTES + BYTES_PER_TOKEN * max_tokens


def endless(base_url: str, too_long: bool, cap: int, allowed_s: float, max_tokens: int) -> ProviderError:
    """The error for a reply stopped for going on past what its request allows."""
    log.warning("stream stopped base_url=%s reason=%s", base_url, "size" if too_long else "deadline")
    if too_long:
        return MalformedStream(
            f"The reply from {base_url} went past {cap // 1024} KB, far more than the tokens it was "
            "allowed (maxOutputTokens) take: Margin stopped reading it. Nothing was applied; check the "
            "model server.", base_url=base_url)
    return BackendTimeout(
        f"The reply from {base_url} was still arriving after {allowed_s:g} s (timeoutS plus "
        f"{SECONDS_PER_TOKEN:g} s for each of {max_tokens} tokens): Margin stopped it. Nothing was "
        "applied; check the model server, or raise timeoutS.", timeout_s=allowed_s, base_url=base_url)


async def capped(response: httpx.Response, cap: int, base_url: str) -> AsyncIterator[bytes]:
    """The response's bytes, stopped with an error past `cap`."""
    received = 0
    async for chunk in response.aiter_bytes():
        received += len(chunk)
        if received > cap:
            raise endless(base_url, True, cap, 0, 0)
        yield chunk


async def read_capped(response: httpx.Response, cap: int, base_url: str) -> bytes:
    return b"".join([chunk async for chunk in capped(response, cap, base_url)])
