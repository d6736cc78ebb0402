"""Which tokenizer a profile counts with, from its `tokenizer` setting, model and backend.

`auto`: OpenAI models → tiktoken (the model's encoding); Mistral models → Tekken; any other
model on a llama.cpp or vLLM server → that server's own `/tokenize`; anything else → the
heuristic (the token bound, core/tokens/bound.py), which never under-counts but is not exact. An explicit setting always wins.
"""

from __future__ import annotations

from dataclasses import dataclass

from margin.core.models import mistral_instruct_version, model_family, tiktoken_encoding_for

DEFAULT_TEKKEN = "tekken_240911"
"""The Tekken vocabulary of current Mistral models (Nemo onwards), shipped by mistral-common."""


@dataclass(frozen=True)
class TokenizerChoice:
    kind: str
    """tiktoken | tekken | llama.cpp | vllm | heuristic"""
    variant: str | None = None
    """the tiktoken encoding or Tekken file, where the kind has one; for vllm, the model asked"""
    framing: str | None = None
    """for Tekken: the instruct version whose chat framing is counted (v3 or v7)"""

    @property
    def name(self) -> str:
        name = f"{self.kind}:{self.variant}" if self.variant else self.kind
        return f"{name}@{self.framing}" if self.framing else name

    @property
    def exact(self) -> bool:
        """Whether counts from this tokenizer are the model's own (when its assets load)."""
        return self.kind != "heuristic"


def choose_tokenizer(
    setting: str, model: str | None, backend_kind: str | None
) -> TokenizerChoice:
    kind, _, variant = setting.partition(":")
    if kind == "tiktoken":
        return TokenizerChoice("tiktoken", variant or tiktoken_encoding_for(model))
    if kind == "tekken":
        return TokenizerChoice("tekken", variant or DEFAULT_TEKKEN, mistral_instruct_version(model))
    if kind in ("llama.cpp", "heuristic"):
        return TokenizerChoice(kind)
    if kind == "vllm":
        return TokenizerChoice("vllm", model)
    family = model_family(model)
    if family == "openai":
        return TokenizerChoice("tiktoken", tiktoken_encoding_for(model))
    if family == "mistral":
        return TokenizerChoice("tekken", DEFAULT_TEKKEN, mistral_instruct_version(model))
    if backend_kind == "llama.cpp":
        return TokenizerChoice("llama.cpp")
    if backend_kind == "vllm":
        return TokenizerChoice("vllm", model)
    return TokenizerChoice("heuristic")
