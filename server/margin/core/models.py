"""What Margin knows about models by name: their family and their documented context window.

Used when the backend does not report its window (OpenAI, Mistral and most hosted APIs) and to
pick a tokenizer. Names are matched case-insensitively on prefixes after any provider path
(`openai/gpt-5` and `gpt-5` are the same model to Margin).
"""

from __future__ import annotations

from typing import Literal

Family = Literal["openai", "mistral"]

FALLBACK_CONTEXT_WINDOW = 4096
"""Used when neither the backend nor this table knows the window: small enough to be safe on
any model still in use, so budgets err towards sending less rather than failing upstream."""

# (prefix, family, context window). The first matching prefix wins, so longer ones come first.
_KNOWN: tuple[tuple[str, Family, int], ...] = (
    ("gpt-5", "openai", 400_000),
    ("gpt-4.1", "openai", 1_047_576),
    ("gpt-4o", "openai", 128_000),
    ("gpt-4-turbo", "openai", 128_000),
    ("gpt-4", "openai", 8_192),
    ("gpt-3.5-turbo", "openai", 16_385),
    ("o4-mini", "openai", 200_000),
    ("o3", "openai", 200_000),
    ("o1", "openai", 200_000),
    ("chatgpt-4o", "openai", 128_000),
    ("devstral-2", "mistral", 256_000),
    ("devstral", "mistral", 128_000),
    ("codestral", "mistral", 256_000),
    ("magistral", "mistral", 128_000),
    ("ministral", "mistral", 128_000),
    ("mistral-large", "mistral", 128_000),
    ("mistral-medium", "mistral", 128_000),
    ("mistral-small", "mistral", 128_000),
    ("mistral-nemo", "mistral", 128_000),
    ("open-mistral-nemo", "mistral", 128_000),
    ("pixtral", "mistral", 128_000),
)


def _bare(model: str) -> str:
    return model.rsplit("/", 1)[-1].strip().lower()


def _lookup(model: str | None) -> tuple[Family, int] | None:
    if not model:
        return None
    name = _bare(model)
    for prefix, family, window in _KNOWN:
        if name.startswith(prefix):
            return family, window
    return None


def model_family(model: str | None) -> Family | None:
    known = _lookup(model)
    return known[0] if known else None


def documented_context_window(model: str | None) -> int | None:
    known = _lookup(model)
    return known[1] if known else None


def tiktoken_encoding_for(model: str | None) -> str:
    """The tiktoken encoding of an OpenAI model, from tiktoken's own table
    (`encoding_name_for_model`), falling back to o200k_base, the encoding of every model since
    GPT-4o."""
    from tiktoken.model import encoding_name_for_model

    try:
        return encoding_name_for_model(_bare(model or ""))
    except KeyError:
        return "o200k_base"


def is_reasoning_model(model: str | None) -> bool:
    """OpenAI's reasoning models (o-series, GPT-5 apart from its chat variant) take
    `max_completion_tokens` instead of `max_tokens` and only their default temperature."""
    name = _bare(model or "")
    if name.startswith("gpt-5"):
        return "chat" not in name
    return name.startswith(("o1", "o3", "o4"))


def resolve_context_window(
    setting: int | str, detected: int | None, detected_source: str | None, model: str | None
) -> tuple[int, str]:
    """The window a profile budgets against, and where that number came from: the setting when
    it is a number, else what the backend reported, else the documented window of the model,
    else FALLBACK_CONTEXT_WINDOW."""
    if isinstance(setting, int):
        return setting, "setting contextWindow"
    if detected:
        return detected, detected_source or "reported by the backend"
    documented = documented_context_window(model)
    if documented:
        return documented, f"documented window of {model}"
    return FALLBACK_CONTEXT_WINDOW, "fallback: the backend did not say and the model is unknown; set contextWindow"


def mistral_instruct_version(model: str | None) -> str:
    """The chat framing a Mistral model uses: v3 for Mistral Nemo (the July 2024 generation),
    v7 for everything current."""
    name = _bare(model or "")
    return "v3" if name.startswith(("mistral-nemo", "open-mistral-nemo")) else "v7"
