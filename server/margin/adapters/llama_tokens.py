"""Counting with a llama.cpp server's own tokenizer: `/tokenize` for texts, and
`/apply-template` + `/tokenize` for a whole chat prompt, which equals the `prompt_tokens` the
server reports for the same messages. Exact for whatever model the server runs."""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

import httpx

from margin.adapters.http_errors import error_from_body, transport_error
from margin.adapters.openai_http import server_root
from margin.core.llm import ChatMessage, MalformedResponse
from margin.core.tokens.counter import CountCache, TokenCounter

CONCURRENCY = 8


class LlamaCppCounter(TokenCounter):
    name = "llama.cpp"
    exact = True

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
                "is it llama.cpp's llama-server?", base_url=self.base_url) from None

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
