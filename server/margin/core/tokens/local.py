"""The in-process exact counters: tiktoken for OpenAI models, Tekken for Mistral models.
Building one reads and checks its asset (about a second): do it off the request path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from margin.core.tokens.assets import openai_encoding_args, tekken_encoding_args
from margin.core.tokens.counter import CountCache, LocalCounter, OpenAIFraming
from margin.core.tokens.cuts import line_cuts_for
from margin.core.tokens.mistral import InstructVersion, MistralFraming

if TYPE_CHECKING:
    import tiktoken


def _encoding(args: dict[str, Any]) -> tiktoken.Encoding:
    import tiktoken

    return tiktoken.Encoding(**args)


def tiktoken_counter(encoding: str, cache: CountCache | None = None) -> LocalCounter:
    args = openai_encoding_args(encoding)
    enc = _encoding(args)
    # Text is counted as ordinary text: a file that contains "<|endoftext|>" is still data.
    return LocalCounter(f"tiktoken:{encoding}", lambda text: len(enc.encode_ordinary(text)),
                        OpenAIFraming(), cache=cache, line_cuts=line_cuts_for(args["pat_str"]))


def tekken_counter(name: str, version: InstructVersion = "v7",
                   cache: CountCache | None = None) -> LocalCounter:
    args = tekken_encoding_args(name)
    enc = _encoding(args)
    return LocalCounter(f"tekken:{name}@{version}", lambda text: len(enc.encode_ordinary(text)),
                        MistralFraming(version), cache=cache, line_cuts=line_cuts_for(args["pat_str"]))
