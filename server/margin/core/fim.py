"""What a fill-in-the-middle call is to Margin: the request (what is asked — the code around the
hole, other files, limits, stop rules, sampling, the model) and the reply. How each route writes
a request on the wire and reads its answer is the adapter's (`adapters/fim_wire.py`); which
route a backend takes is found per backend (`services/completion_routes.py`).

Routes (SPEC J): `infill` (llama.cpp `/infill`), `mistral_fim` (Mistral `/fim/completions`),
`completions_suffix` (`/completions` with `suffix`) and `raw_fim` (`/completions` with the
family's FIM tokens written out in the prompt). `core/completion/formats.py` decides what each
route's request holds for a completion prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from margin.core.completion.prompt import Snippet
from margin.core.llm import Usage

FimRoute = Literal["infill", "mistral_fim", "completions_suffix", "raw_fim"]


@dataclass(frozen=True, slots=True)
class Sampling:
    """A sampler chain and its cut-offs, for a backend that takes them (llama.cpp)."""

    top_k: int
    top_p: float
    samplers: tuple[str, ...]


@dataclass(frozen=True)
class FimRequest:
    """One fill-in-the-middle call. None (or empty) leaves a setting to the backend: it is not
    sent. The settings past `model` are taken by llama.cpp's `/infill` only."""

    route: FimRoute
    prefix: str
    """the text before the hole, as the model is to read it: for `infill`, the whole lines
    before the cursor's (`line` is the rest); for `mistral_fim`, other files' blocks and then
    the code; for `raw_fim`, the whole prompt with the family's FIM tokens written out"""
    suffix: str
    """the text after the hole (`raw_fim` sends none: it is inside `prefix`)"""
    max_tokens: int
    temperature: float | None = None
    model: str | None = None
    stop: tuple[str, ...] = ()
    """strings that end the answer"""
    line: str = ""
    """the cursor's line up to the cursor, sent apart from `prefix` (llama.cpp's `prompt`)"""
    extra: tuple[Snippet, ...] | None = None
    """other files, laid out by the server itself"""
    min_indent: int | None = None
    """stop at a line indented less than this (llama.cpp's `n_indent`)"""
    time_limit_ms: int | None = None
    """stop at the first line break after this long (llama.cpp's `t_max_predict_ms`)"""
    sampling: Sampling | None = None
    cache_prompt: bool | None = None
    """whether the server keeps the prompt's evaluation for the next request"""


@dataclass(frozen=True)
class FimReply:
    """The text that goes in the hole, why the model stopped (`stop`, `length`, or None when the
    backend does not say) and the token counts the backend reports."""

    text: str
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
