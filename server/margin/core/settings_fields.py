"""The kinds of value a setting takes, checked as pydantic checks them (a base URL, a tokenizer
name, a context window, an optional name), the configuration every settings model shares, and
USER_ONLY, the mark on settings that only the user's own places may set."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

TOKENIZER_KINDS = ("tiktoken", "tekken", "llama.cpp", "vllm", "heuristic")


def _check_base_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            "must be an http(s) URL including the API prefix, e.g. http://127.0.0.1:8080/v1"
        )
    if "@" in parts.netloc:
        raise ValueError(
            "must not hold a user name or password: keep the key in an environment variable and "
            "name that variable in apiKeyEnv"
        )
    return value.rstrip("/")


def _check_tokenizer(value: str) -> str:
    kind = value.split(":", 1)[0]
    if value != "auto" and kind not in TOKENIZER_KINDS:
        raise ValueError(
            "must be 'auto' or one of tiktoken[:ENCODING], tekken[:FILE], llama.cpp, vllm, heuristic"
        )
    if kind in ("llama.cpp", "vllm", "heuristic") and ":" in value:
        raise ValueError(f"'{kind}' takes no ':' suffix")
    return value


def _auto_or_int(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return value


def _blank_is_unset(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


BaseUrl = Annotated[str, AfterValidator(_check_base_url)]
Tokenizer = Annotated[str, AfterValidator(_check_tokenizer)]
ContextWindow = Annotated[
    Literal["auto"] | Annotated[int, Field(ge=256)], BeforeValidator(_auto_or_int)
]
OptionalName = Annotated[str | None, BeforeValidator(_blank_is_unset)]

USER_ONLY: dict[str, Any] = {"scope": "machine"}
"""Marks a setting that decides where prompts, API keys or Margin's own files go. Margin takes it
only from places no repository's files can write — the environment, the user settings file, the
editor's start-up options (`initializationOptions`) — never from workspace settings; in VS Code
it has the `machine` scope (user or remote settings only, never a workspace's) and is listed in
`restrictedConfigurations` (scripts/generate_vscode_settings.py reads this mark)."""


def user_only_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The python names (`base_url`) of `model`'s fields marked USER_ONLY."""
    return tuple(name for name, info in model.model_fields.items() if info.json_schema_extra == USER_ONLY)


MODEL_CONFIG = ConfigDict(
    extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
)
