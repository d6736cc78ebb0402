"""Counting with the model server's own tokenizer, exact for whatever model it runs.

llama.cpp: `/tokenize` for texts, and `/apply-template` + `/tokenize` for a whole chat prompt,
which equals the `prompt_tokens` the server reports for the same messages. vLLM: its `/tokenize`
takes a text (`prompt`) or a chat (`messages`, templated with the generation prompt, tools
included) and answers the `count`. A server that does not serve these (404, 405 or 501: a proxy in
front of llama.cpp, an old vLLM) is counted with the token bound from then on, marked approximate,
with one warning; status and `margin doctor` say so. They carry the profile's API key when its
requests do (llama.cpp started with --api-key checks it there too): the same server, the same
origin (core/api_keys.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import httpx

from margin.adapters.http_errors import error_from_body, transport_error
from margin.adapters.openai_http import server_root
from margin.adapters.reconnect import ReconnectOnce
from margin.core.llm import ChatMessage, MalformedResponse
from margin.core.tokens.counter import CountCache, TokenCounter, heuristic_counter

log = logging.getLogger(__name__)

CONCURRENCY = 8


NOT_SERVED = (404, 405, 501)
"""answers that say the server has no such endpoint"""


class _NotServed(Exception):
    pass


class ServerCounter(TokenCounter):
    """A counter that asks the model server: one HTTP client, a bound on requests at once, and the
    token bound in its place once the server says it does not count."""

    exact = True
    server = "the model server"
    """what the server is, for messages"""

    def __init__(self, base_url: str, *, timeout_s: float, cache: CountCache | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._root = server_root(self.base_url)
        self._timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), transport=ReconnectOnce(transport),
                                         headers=headers)
        self._limit = asyncio.Semaphore(CONCURRENCY)
        self.cache = cache if cache is not None else CountCache()
        self.fallback: TokenCounter | None = None
        """the token bound, once the server has said it does not count"""
        self.unavailable: str | None = None
        """why, then (for status and doctor)"""

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with self._limit:
            try:
                response = await self._client.post(f"{self._root}{path}", json=body)
            except httpx.HTTPError as error:
                raise transport_error(self.base_url, self._timeout_s, error, streaming=False) from error
        if response.status_code in NOT_SERVED:
            if self.fallback is None:
                self.unavailable = f"{self._root}{path} answered HTTP {response.status_code}"
                log.warning("tokenizer %s unavailable (%s %s answered HTTP %d); counting with the token bound",
                            self.name, self.server, path, response.status_code)
                self.fallback, self.exact, self.name = heuristic_counter(), False, "heuristic"
            raise _NotServed
        if response.status_code >= 400:
            raise error_from_body(response.status_code, response.content, self.base_url)
        try:
            data = response.json()
            if not isinstance(data, dict):
                raise ValueError  # noqa: TRY004 - a JSON answer of the wrong shape: malformed, as below
            return data
        except ValueError:
            raise MalformedResponse(
                f"The server at {self._root} answered {path} with something that is not JSON; "
                f"is it {self.server}?", base_url=self.base_url) from None

    async def _count_text(self, text: str) -> int:
        raise NotImplementedError

    async def _count_chat(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]]) -> int:
        raise NotImplementedError

    async def count_texts(self, texts: Sequence[str]) -> list[int]:
        if self.fallback is None:
            counts = [0 if not text else self.cache.get(text) for text in texts]
            missing = [i for i, count in enumerate(counts) if count is None]
            try:
                found = await asyncio.gather(*(self._count_text(texts[i]) for i in missing))
            except _NotServed:
                pass
            else:
                for i, count in zip(missing, found):
                    self.cache.put(texts[i], count)
                    counts[i] = count
                return counts  # type: ignore[return-value]
        assert self.fallback is not None
        return await self.fallback.count_texts(texts)

    async def count_chat(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] = ()) -> int:
        if self.fallback is None:
            try:
                return await self._count_chat(messages, tools)
            except _NotServed:
                pass
        assert self.fallback is not None
        return await self.fallback.count_chat(messages, tools)


class LlamaCppCounter(ServerCounter):
    name = "llama.cpp"
    server = "llama.cpp's llama-server"

    async def _tokenize(self, content: str, *, add_special: bool) -> int:
        data = await self._post("/tokenize", {"content": content, "add_special": add_special,
                                              "parse_special": True})
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise MalformedResponse(f"/tokenize at {self._root} returned no token list",
                                    base_url=self.base_url)
        return len(tokens)

    async def _count_text(self, text: str) -> int:
        return await self._tokenize(text, add_special=False)

    async def _count_chat(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]]) -> int:
        body: dict[str, Any] = {"messages": [m.as_json() for m in messages]}
        if tools:
            body["tools"] = list(tools)
        data = await self._post("/apply-template", body)
        prompt = data.get("prompt")
        if not isinstance(prompt, str):
            raise MalformedResponse(f"/apply-template at {self._root} returned no prompt",
                                    base_url=self.base_url)
        return await self._tokenize(prompt, add_special=True)


class VllmCounter(ServerCounter):
    name = "vllm"
    server = "vLLM"

    def __init__(self, base_url: str, *, model: str | None, timeout_s: float, cache: CountCache | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, api_key: str | None = None) -> None:
        super().__init__(base_url, timeout_s=timeout_s, cache=cache, transport=transport, api_key=api_key)
        self.model = model

    async def _ask(self, body: dict[str, Any]) -> int:
        data = await self._post("/tokenize", {"model": self.model, **body} if self.model else body)
        count = data.get("count")
        if not isinstance(count, int) or count < 0:
            raise MalformedResponse(f"/tokenize at {self._root} returned no count; is it vLLM?",
                                    base_url=self.base_url)
        return count

    async def _count_text(self, text: str) -> int:
        return await self._ask({"prompt": text, "add_special_tokens": False})

    async def _count_chat(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]]) -> int:
        body: dict[str, Any] = {"messages": [m.as_json() for m in messages], "add_generation_prompt": True}
        if tools:
            body["tools"] = list(tools)
        return await self._ask(body)
