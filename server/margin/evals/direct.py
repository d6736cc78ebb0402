"""The same problem sent straight to the model, as a person would without Margin: the model's
plain fill-in-the-middle request (the whole text before and after the hole, no budget, no
other files, no post-processing), or for a model with no fill-in-the-middle route the simplest
honest instruction in one chat message. `margin eval completion` sets it beside Margin's answer
to the same problem, so that whatever Margin's prompts, budgets and post-processing cost or
gain is measured.

Plain HTTP (httpx), not Margin's provider: the baseline shares nothing with what it measures
but the endpoint, the model, the temperature, the output limit and the API key Margin would
send there (api_keys.decide: a key goes only where the user's own settings send it).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from margin.core.completion.formats import family_for

ROUTES = ("infill", "completions_suffix", "raw_fim", "mistral_fim", "chat")
HOLE = "<HOLE>"
INSTRUCTION = ("Fill in the hole marked {hole} in this Python code. Answer with only the code that "
               "replaces {hole}, in one ```python block.\n\n```python\n{code}\n```")
"""the chat route's one message: the file with the hole marked where the cursor is"""
_FENCED = re.compile(r"```[A-Za-z0-9_+-]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CLOSED = re.compile(r"^```[A-Za-z0-9_+-]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class DirectAnswer:
    text: str | None
    seconds: float
    prompt_tokens: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    """OpenAI-style, with its API prefix (`http://127.0.0.1:8080/v1`)"""
    model: str | None
    api_key: str | None
    temperature: float
    max_tokens: int
    timeout_s: float


def chat_answer(reply: str) -> str:
    """The code of a chat reply: its first fenced block's, else the reply itself."""
    found = _FENCED.search(reply)
    return found.group(1) if found else reply


def fenced_blocks(reply: str) -> list[str]:
    """The code of every fenced block of a reply that is closed (an answer cut off at the output
    limit has no whole file), fences at the start of a line."""
    return [found.group(1) for found in _CLOSED.finditer(reply)]


class DirectClient:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        self._http = httpx.AsyncClient(headers=headers, timeout=endpoint.timeout_s, trust_env=False)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def fill(self, route: str, prefix: str, suffix: str, document: tuple[str, int] | None = None) -> DirectAnswer:
        """The model's middle for the hole between `prefix` and `suffix` by `route`; for the chat
        route, `document` is the editor's text and the cursor's offset in it (where the hole is
        marked)."""
        started = time.perf_counter()
        try:
            url, body, read = self._request(route, prefix, suffix, document)
            response = await self._http.post(url, json=body)
            response.raise_for_status()
            answer = response.json()
            text, tokens = read(answer)
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as error:
            return DirectAnswer(None, time.perf_counter() - started, error=f"{type(error).__name__}: {error}"[:300])
        return DirectAnswer(text, time.perf_counter() - started, tokens)

    async def chat(self, messages: list[dict[str, str]]) -> DirectAnswer:
        """The model's reply to `messages` (role and content each), as it came."""
        e = self.endpoint
        body = {**({"model": e.model} if e.model else {}), "messages": messages, "max_tokens": e.max_tokens,
                "temperature": e.temperature}
        started = time.perf_counter()
        try:
            response = await self._http.post(e.base_url.rstrip("/") + "/chat/completions", json=body)
            response.raise_for_status()
            answer = response.json()
            text = answer["choices"][0]["message"]["content"] or ""
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as error:
            return DirectAnswer(None, time.perf_counter() - started, error=f"{type(error).__name__}: {error}"[:300])
        return DirectAnswer(text, time.perf_counter() - started, _prompt_tokens(answer))

    def _request(self, route: str, prefix: str, suffix: str, document: tuple[str, int] | None) -> tuple[str, dict[str, Any], Any]:
        e = self.endpoint
        base = e.base_url.rstrip("/")
        model = {"model": e.model} if e.model else {}
        if route == "infill":
            body = {"input_prefix": prefix, "input_suffix": suffix, "n_predict": e.max_tokens,
                    "temperature": e.temperature, "stream": False}
            return base.removesuffix("/v1") + "/infill", body, lambda a: (a["content"], a.get("tokens_evaluated"))
        if route in ("completions_suffix", "raw_fim"):
            if route == "raw_fim":
                family = family_for(e.model)
                if family is None:
                    raise ValueError(f"no fill-in-the-middle tokens known for model {e.model!r}")
                body = {**model, "prompt": family.render(prefix, suffix), "stop": list(family.stop)}
            else:
                body = {**model, "prompt": prefix, "suffix": suffix}
            body |= {"max_tokens": e.max_tokens, "temperature": e.temperature}
            return base + "/completions", body, lambda a: (a["choices"][0]["text"], _prompt_tokens(a))
        if route == "mistral_fim":
            body = {**model, "prompt": prefix, "suffix": suffix, "max_tokens": e.max_tokens, "temperature": e.temperature}
            return base + "/fim/completions", body, lambda a: (a["choices"][0]["message"]["content"], _prompt_tokens(a))
        if route == "chat":
            text, at = document if document is not None else (prefix + suffix, len(prefix))
            message = INSTRUCTION.format(hole=HOLE, code=text[:at] + HOLE + text[at:])
            body = {**model, "messages": [{"role": "user", "content": message}], "max_tokens": e.max_tokens,
                    "temperature": e.temperature}
            return base + "/chat/completions", body, lambda a: (chat_answer(a["choices"][0]["message"]["content"] or ""),
                                                                _prompt_tokens(a))
        raise ValueError(f"no route {route!r}: the routes are {', '.join(ROUTES)}")


def _prompt_tokens(answer: dict[str, Any]) -> int | None:
    usage = answer.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) else None
