"""How each fill-in-the-middle route is written on the wire: where a `FimRequest` is POSTed, the
JSON body it becomes, and how the answer (joined from its stream, `stream_shapes.sse_answer`)
reads as a `FimReply`.

    infill               llama.cpp's own `/infill`, at the server's root: `input_prefix`,
                         `input_suffix`, `input_extra`, the cursor line as `prompt`, `n_predict`,
                         `n_indent`, `t_max_predict_ms`, the sampler chain, `cache_prompt`
    mistral_fim          `/fim/completions` under the base URL (Mistral): `prompt` and `suffix`
    completions_suffix   `/completions` under the base URL: `prompt` and `suffix`
    raw_fim              `/completions` under the base URL: `prompt` only (the FIM tokens are in it)

Every body asks for a stream (see `OpenAICompatibleProvider.fill`). An answer of the wrong
shape raises one of `WRONG_SHAPE` here; the provider reports it as `MalformedResponse`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from margin.adapters.stream_shapes import usage_of
from margin.core.fim import FimReply, FimRequest, FimRoute
from margin.core.llm import Usage


def infill_body(request: FimRequest) -> dict[str, Any]:
    """llama.cpp's `/infill` body: a setting that is None is left out (the route probe sends
    hardly any)."""
    body: dict[str, Any] = {"input_prefix": request.prefix, "input_suffix": request.suffix}
    if request.extra is not None:
        body["input_extra"] = [{"filename": s.file_id, "text": s.text} for s in request.extra]
    body["prompt"] = request.line
    body["n_predict"] = request.max_tokens
    if request.min_indent is not None:
        body["n_indent"] = request.min_indent
    if request.time_limit_ms is not None:
        body["t_max_predict_ms"] = request.time_limit_ms
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.sampling is not None:
        body.update(top_k=request.sampling.top_k, top_p=request.sampling.top_p,
                    samplers=list(request.sampling.samplers))
    if request.stop:
        body["stop"] = list(request.stop)
    if request.cache_prompt is not None:
        body["cache_prompt"] = request.cache_prompt
    body["stream"] = True
    if request.model:
        body["model"] = request.model
    return body


def completions_body(request: FimRequest) -> dict[str, Any]:
    """An OpenAI-style completions body (`/completions`, Mistral's `/fim/completions`): `suffix`
    unless the prompt is a raw FIM template."""
    body: dict[str, Any] = {"model": request.model or "", "prompt": request.prefix}
    if request.route != "raw_fim":
        body["suffix"] = request.suffix
    body["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.stop:
        body["stop"] = list(request.stop)
    body["stream"] = True
    return body


WRONG_SHAPE = (AttributeError, IndexError, KeyError, TypeError, ValueError)

_LLAMA_STOPS = {"limit": "length", "eos": "stop", "word": "stop"}
"""llama.cpp's `stop_type`, as OpenAI's `finish_reason`"""


def infill_reply(answer: dict[str, Any]) -> FimReply:
    """llama.cpp's answer: `content`, `stop_type`, `tokens_evaluated`/`tokens_predicted`."""
    usage = Usage(_count(answer.get("tokens_evaluated")), _count(answer.get("tokens_predicted")))
    return FimReply(_text(answer.get("content")), _LLAMA_STOPS.get(str(answer.get("stop_type"))), usage)


def completions_reply(answer: dict[str, Any]) -> FimReply:
    """An OpenAI-style answer: `choices[0].text`, or `.message.content` for a chat-shaped one
    (Mistral's)."""
    choice = (answer.get("choices") or [{}])[0]
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else choice.get("text")
    finish = choice.get("finish_reason")
    return FimReply(_text(text), finish if isinstance(finish, str) else None,
                    usage_of(answer.get("usage")) or Usage())


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError("the answer's text is not a string")
    return value


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) else None


@dataclass(frozen=True)
class FimWire:
    """Where a route's requests go and how they are written and read."""

    path: str
    """under the base URL, or under the server's root when `at_root`"""
    at_root: bool
    body: Callable[[FimRequest], dict[str, Any]]
    reply: Callable[[dict[str, Any]], FimReply]


WIRES: dict[FimRoute, FimWire] = {
    "infill": FimWire("/infill", True, infill_body, infill_reply),
    "mistral_fim": FimWire("/fim/completions", False, completions_body, completions_reply),
    "completions_suffix": FimWire("/completions", False, completions_body, completions_reply),
    "raw_fim": FimWire("/completions", False, completions_body, completions_reply),
}
