"""How an OpenAI-compatible backend's failures map onto Margin's error tree (core.llm): an HTTP
error status with its body (context too large in the llama.cpp, OpenAI, vLLM and Mistral
forms, with the sizes when the backend states them), and failures below HTTP (refused, timed
out, cut mid-stream)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from margin.core.llm import (
    BackendHTTPError,
    BackendTimeout,
    BackendUnreachable,
    ContextTooLarge,
    MalformedResponse,
    MalformedStream,
    NotSupported,
    ProviderError,
)

_DETAIL_LIMIT = 300


_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d+)"),
    re.compile(r"(\d+) maximum context length"),
    re.compile(r"context length of only (\d+)"),
    re.compile(r"context (?:window|size|length) (?:is |of )?(\d+)"),
)
_PROMPT_PATTERNS = (
    re.compile(r"messages resulted in (\d+) tokens"),
    re.compile(r"\((\d+) in the messages"),
    re.compile(r"request has (\d+) input tokens"),
    re.compile(r"[Pp]rompt contains (\d+) tokens"),
    re.compile(r"prompt (?:is|has) (\d+) tokens"),
)
_CONTEXT_HINTS = re.compile(
    r"context[ _](length|window|size)|too large for model|exceeds? the available context",
    re.IGNORECASE,
)


def _first_int(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        if match := pattern.search(text):
            return int(match.group(1))
    return None


def error_from_body(status: int, body: bytes | str | dict[str, Any], base_url: str) -> ProviderError:
    """The typed error for an error reply (an HTTP error body, or an error object inside a
    stream). Recognises context-too-large from llama.cpp (`exceed_context_size_error` with
    `n_prompt_tokens`/`n_ctx`), OpenAI (`context_length_exceeded`), vLLM and Mistral."""
    data: Any = body
    if isinstance(body, (bytes, str)):
        try:
            data = json.loads(body)
        except ValueError:
            data = {"message": body.decode("utf-8", "replace") if isinstance(body, bytes) else body}
    error = data.get("error", data) if isinstance(data, dict) else {"message": str(data)}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    message = str(error.get("message") or data.get("detail") or "").strip()
    err_type, code = error.get("type"), error.get("code")

    if (
        err_type == "exceed_context_size_error"
        or code == "context_length_exceeded"
        or _CONTEXT_HINTS.search(message)
    ):
        prompt = error.get("n_prompt_tokens")
        window = error.get("n_ctx")
        prompt = prompt if isinstance(prompt, int) else _first_int(_PROMPT_PATTERNS, message)
        window = window if isinstance(window, int) else _first_int(_WINDOW_PATTERNS, message)
        sizes = (
            f"the prompt is {prompt if prompt is not None else 'an unknown number of'} tokens "
            f"and the model's window is {window if window is not None else 'smaller'}"
            + (" tokens" if window is not None else "")
        )
        return ContextTooLarge(
            f"The backend at {base_url} refused the request as too large for its context "
            f"window: {sizes}. Send less (close files, shorten the selection, start a new "
            f"thread) or, if the server's window is larger than Margin thinks, set "
            f"contextWindow.",
            status=status,
            prompt_tokens=prompt,
            context_window=window,
            base_url=base_url,
        )

    detail = f"HTTP {status}" + (f": {message[:_DETAIL_LIMIT]}" if message else "")
    # Ollama refuses `suffix` for a model whose template cannot insert with HTTP 400
    # `"<model>" does not support insert` (its capability check; docs.ollama.com/api/openai-compatibility
    # lists `suffix` among /v1/completions' fields): the route is unsupported, not the settings wrong.
    if err_type == "not_supported_error" or status in (405, 501) or (
            status == 400 and "does not support insert" in message):
        return NotSupported(f"The backend at {base_url} does not support this request ({detail}).",
                            status=status, base_url=base_url)
    if status in (401, 403):
        advice = "Check the API key: set apiKeyEnv to the name of the variable that holds it."
    elif status == 404:
        advice = "Check baseUrl (it includes the API prefix, e.g. http://127.0.0.1:8080/v1) and model."
    elif status == 429:
        advice = "The backend is rate-limiting requests; try again shortly."
    elif status >= 500:
        advice = "The backend failed; its own log says why."
    else:
        advice = "Check the profile's settings (model, maxOutputTokens, temperature)."
    return BackendHTTPError(
        f"The backend at {base_url} answered {detail}. {advice}", status=status, base_url=base_url
    )


def transport_error(
    base_url: str, timeout_s: float, error: httpx.HTTPError, *, streaming: bool
) -> ProviderError:
    """The typed error for a failure below HTTP (no connection, no answer in time, a cut)."""
    if isinstance(error, httpx.TimeoutException):
        what = "stopped sending for" if streaming else "did not answer within"
        return BackendTimeout(
            f"The backend at {base_url} {what} {timeout_s:g} s (timeoutS). "
            "Check that the model server is running and not overloaded, or raise timeoutS.",
            timeout_s=timeout_s,
            base_url=base_url,
        )
    if isinstance(error, (httpx.ConnectError, httpx.UnsupportedProtocol)):
        return BackendUnreachable(
            f"Nothing answers at {base_url} ({type(error).__name__}). Start the model "
            "server, or fix baseUrl.",
            base_url=base_url,
        )
    if streaming:
        return MalformedStream(
            f"The backend at {base_url} cut the connection in the middle of the reply "
            f"({type(error).__name__}). Nothing was applied; try again.",
            base_url=base_url,
        )
    return MalformedResponse(
        f"The backend at {base_url} closed the connection before replying "
        f"({type(error).__name__}). Try again; check the model server's log if it repeats.",
        base_url=base_url,
    )
