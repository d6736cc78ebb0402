"""Counting with the model server's own tokenizer, exact for whatever model it runs.

llama.cpp: `/tokenize` for texts, and `/apply-template` + `/tokenize` for a whole chat prompt,
which equals the `prompt_tokens` the server reports for the same messages. vLLM: its `/tokenize`
takes a text (`prompt`) or a chat (`messages`, templated with the generation prompt, tools
included) and answers the `count`; a vLLM that does not serve it (404) is counted with the token
bound from then on, marked approximate. Neither is sent the API key (both endpoints sit outside
`/v1`, where servers check keys)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Sequence

import httpx

from margin.adapters.http_errors import error_from_body, transport_error
from margin.adapters.openai_http import server_root
from margin.core.llm import ChatMessage, MalformedResponse
from margin.core.tokens.counter import CountCache, TokenCounter, heuristic_counter

log = logging.getLogger(__name__)

CONCURRENCY = 8


class ServerCounter(TokenCounter):
    """A counter that asks the model server: one HTTP client, a bound on requests at once."""

    exact = True
    server = "the model server"
    """what the server is, for messages"""

    def __init__(self, base_url: str, *, timeout_s: float, cache: CountCache | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._root = server_root(self.base_url)
        self._timeout_s = timeout_s
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), transport=transport)
        self._limit = asyncio.Semaphore(CONCURRENCY)
        self.cache = cache if cache is not None else CountCache()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with self._limit:
            try:
                response = await self._client.post(f"{self._root}{path}", json=body)
            except httpx.HTTPError as error:
                raise transport_error(self.base_url, self._timeout_s, error, streaming=False) from error
        if response.status_code >= 400:
            raise error_from_body(response.status_code, response.content, self.base_url)
        try:
            data = response.json()
            if not isinstance(data, dict):
                raise ValueError
            return data
        except ValueError:
            raise MalformedResponse(
                f"The server at {self._root} answered {path} with something that is not JSON; "
                f"is it {self.server}?", base_url=self.base_url) from None


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

    async def count_texts(self, texts: Sequence[str]) -> list[int]:
        counts = [0 if not text else self.cache.get(text) for text in texts]
        missing = [i for i, count in enumerate(counts) if count is None]
        found = await asyncio.gather(*(self._tokenize(texts[i], add_special=False) for i in missing))
        for i, count in zip(missing, found):
            self.cache.put(texts[i], count)
            counts[i] = count
        return counts  # type: ignore[return-value]

    async def count_chat(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] = ()) -> int:
        body: dict[str, Any] = {"messages": [m.as_json() for m in messages]}
        if tools:
            body["tools"] = list(tools)
        data = await self._post("/apply-template", body)
        prompt = data.get("prompt")
        if not isinstance(prompt, str):
            raise MalformedResponse(f"/apply-template at {self._root} returned no prompt",
                                    base_url=self.base_url)
        return await self._tokenize(prompt, add_special=True)


NOT_SERVED = (404, 405, 501)


class VllmCounter(ServerCounter):
    name = "vllm"
    server = "vLLM"

    def __init__(self, base_url: str, *, model: str | None, timeout_s: float, cache: CountCache | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(base_url, timeout_s=timeout_s, cache=cache, transport=transport)
        self.model = model
        self.fallback: TokenCounter | None = None
        """the token bound, once the server has said it does not serve /tokenize"""

    async def _count(self, body: dict[str, Any]) -> int | None:
        """The server's count for `body`, or None when it does not serve /tokenize."""
        if self.model:
            body = {"model": self.model, **body}
        async with self._limit:
            try:
                response = await self._client.post(f"{self._root}/tokenize", json=body)
            except httpx.HTTPError as error:
                raise transport_error(self.base_url, self._timeout_s, error, streaming=False) from error
        if response.status_code in NOT_SERVED:
            if self.fallback is None:
                log.warning("vLLM at %s answered /tokenize with HTTP %d; counting with the token bound",
                            self._root, response.status_code)
                self.fallback, self.exact, self.name = heuristic_counter(), False, "heuristic"
            return None
        if response.status_code >= 400:
            raise error_from_body(response.status_code, response.content, self.base_url)
        try:
            count = response.json().get("count")
        except (ValueError, AttributeError):
            count = None
        if not isinstance(count, int) or count < 0:
            raise MalformedResponse(f"/tokenize at {self._root} returned no count; is it vLLM?",
                                    base_url=self.base_url)
        return count

    async def count_texts(self, texts: Sequence[str]) -> list[int]:
        if self.fallback is not None:
            return await self.fallback.count_texts(texts)
        counts = [0 if not text else self.cache.get(text) for text in texts]
        missing = [i for i, count in enumerate(counts) if count is None]
        found = await asyncio.gather(*(self._count({"prompt": texts[i], "add_special_tokens": False})
                                       for i in missing))
        if self.fallback is not None:
            return await self.fallback.count_texts(texts)
        for i, count in zip(missing, found):
            self.cache.put(texts[i], count)  # type: ignore[arg-type]
            counts[i] = count
        return counts  # type: ignore[return-value]

    async def count_chat(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] = ()) -> int:
        if self.fallback is None:
            body: dict[str, Any] = {"messages": [m.as_json() for m in messages], "add_generation_prompt": True}
            if tools:
                body["tools"] = list(tools)
            count = await self._count(body)
            if count is not None:
                return count
        assert self.fallback is not None
        return await self.fallback.count_chat(messages, tools)
