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
    sampling = request.sampling
    return {
        "input_prefix": request.prefix, "input_suffix": request.suffix,
        **_given(input_extra=None if request.extra is None else
                 [{"filename": s.file_id, "text": s.text} for s in request.extra]),
        "prompt": request.line, "n_predict": request.max_tokens,
        **_given(n_indent=request.min_indent, t_max_predict_ms=request.time_limit_ms,
                 temperature=request.temperature),
        **({} if sampling is None else
           {"top_k": sampling.top_k, "top_p": sampling.top_p, "samplers": list(sampling.samplers)}),
        **_given(stop=list(request.stop) or None, cache_prompt=request.cache_prompt),
        "stream": True,
        **_given(model=request.model or None),
    }


def completions_body(request: FimRequest) -> dict[str, Any]:
    """An OpenAI-style completions body (`/completions`, Mistral's `/fim/completions`): `suffix`
    unless the prompt is a raw FIM template."""
    return {
        "model": request.model or "", "prompt": request.prefix,
        **_given(suffix=None if request.route == "raw_fim" else request.suffix),
        "max_tokens": request.max_tokens,
        **_given(temperature=request.temperature, stop=list(request.stop) or None),
        "stream": True,
    }


def _given(**values: Any) -> dict[str, Any]:
    """The values that are not None (None: the server's default), in the order given."""
    return {key: value for key, value in values.items() if value is not None}


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
