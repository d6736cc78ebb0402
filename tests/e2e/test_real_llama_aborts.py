"""A model call Margin stops waiting for stops the generation on the real llama.cpp server.

llama.cpp runs a non-streamed request to its end even after its client has gone (on a loaded
machine a 128-token completion holds a slot for over a minute), but stops a stream whose client
went away at its next token. So every call whose answer may be abandoned — a completion replaced
by a newer keystroke, an edit cancelled, a summary giving way to typing, a route probe — is sent
as a stream, and a timeout closes it. Each shape Margin sends is abandoned here mid-generation,
and the server must report no slot processing within 2 s (its `/slots` endpoint) — or, on a
machine so loaded that it generates slower than that, within three tokens of the abort."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from margin.adapters.openai_http import OpenAICompatibleProvider
from margin.core.fim import FimRequest
from margin.core.llm import BackendTimeout, ChatMessage, ChatRequest

pytestmark = pytest.mark.llama

ENDLESS = "Repeat the word hello one thousand times, separated by spaces, and nothing else."
"""a request Gemma 3 270M answers at length (it repeats until max_tokens)"""
MAX_TOKENS = 1000
STOPS_WITHIN_S = 2.0
STOPS_WITHIN_TOKENS = 3
"""a machine so loaded that three tokens take longer than 2 s still shows the stop: llama.cpp
notices a client gone when it sends the next token"""


class Slots:
    """Watches llama.cpp's `/slots` every 50 ms: whether a slot is processing, and how many tokens
    it has generated (`next_token.n_decoded`)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.decoded = 0
        self.processing = False

    async def poll(self) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            slots = (await client.get(f"{self.root}/slots")).json()
        busy = [slot for slot in slots if slot["is_processing"]]
        self.processing = bool(busy)
        self.decoded = max((slot.get("next_token", [{}])[0].get("n_decoded", 0) for slot in busy), default=0)

    async def until(self, condition) -> None:
        await self.poll()
        while not condition():
            await asyncio.sleep(0.05)
            await self.poll()

    async def stopped(self, aborted_at_decoded: int) -> tuple[float, int]:
        """Waits for no slot processing; the seconds that took and the most tokens generated
        after the abort that were seen on the way (given up on once past both limits)."""
        started, most = time.monotonic(), aborted_at_decoded
        while True:
            await self.poll()
            seconds, tokens = time.monotonic() - started, most - aborted_at_decoded
            if not self.processing or (seconds > STOPS_WITHIN_S and tokens > STOPS_WITHIN_TOKENS):
                return seconds, tokens
            most = max(most, self.decoded)
            await asyncio.sleep(0.05)


def check(shape: str, what: str, seconds: float, tokens: int) -> None:
    assert seconds <= STOPS_WITHIN_S or tokens <= STOPS_WITHIN_TOKENS, (
        f"a slot was still generating {seconds:.1f} s and {tokens} tokens after the {shape} call {what}")


def call(provider: OpenAICompatibleProvider, shape: str):
    """The three ways Margin asks a model: a whole reply (the chat completion route, edit-ops,
    selection edits), a completion endpoint (/completions, /infill: the FIM routes and the route
    probe) and a stream (chat, summaries)."""
    request = ChatRequest([ChatMessage("user", ENDLESS)], MAX_TOKENS, 0.0)
    if shape == "complete":
        return provider.complete(request)
    if shape == "completion endpoint":
        return provider.fill(FimRequest("raw_fim", "hello hello hello hello hello hello hello", "",
                                        max_tokens=MAX_TOKENS, temperature=0.0))

    async def read() -> None:
        async for _ in provider.stream(request):
            pass
    return read()


@pytest.mark.parametrize("shape", ["complete", "completion endpoint", "stream"])
async def test_a_cancelled_call_stops_the_generation(llama_server, shape):
    slots = Slots(llama_server.root)
    await slots.until(lambda: not slots.processing)  # nothing left over from another test
    provider = OpenAICompatibleProvider(llama_server.base_url, timeout_s=600)
    try:
        task = asyncio.ensure_future(call(provider, shape))
        await slots.until(lambda: slots.decoded >= 2)  # generating, past the prompt
        aborted_at = slots.decoded
        task.cancel()  # what a newer keystroke or $/cancelRequest does to the handler
        with pytest.raises(asyncio.CancelledError):
            await task
        seconds, tokens = await slots.stopped(aborted_at)
    finally:
        await provider.aclose()
    check(shape, "was cancelled", seconds, tokens)


@pytest.mark.parametrize("shape", ["complete", "completion endpoint"])
async def test_a_call_that_times_out_stops_the_generation(llama_server, shape):
    slots = Slots(llama_server.root)
    await slots.until(lambda: not slots.processing)
    provider = OpenAICompatibleProvider(llama_server.base_url, timeout_s=3)
    watching = True

    async def watch() -> None:
        while watching:
            await slots.poll()
            await asyncio.sleep(0.05)
    watcher = asyncio.ensure_future(watch())
    try:
        with pytest.raises(BackendTimeout):
            await call(provider, shape)
        aborted_at, generating = slots.decoded, slots.processing  # the last look before the timeout
        watching = False
        await watcher
        # (on a loaded machine it may still be reading the prompt: then it stops at its first token)
        assert generating, "the request timed out before the server began it"
        seconds, tokens = await slots.stopped(aborted_at)
    finally:
        watching = False
        await provider.aclose()
    check(shape, "timed out", seconds, tokens)
