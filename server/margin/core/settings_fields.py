"""The kinds of value a setting takes, checked as pydantic checks them (a base URL, a tokenizer
name, a context window, an optional name, a code-action preset, lists given as text), their
built-in lists, the configuration every settings model shares, and the mark every setting carries
of what workspace settings may do with it (`from_workspace`)."""

from __future__ import annotations

import json
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

WorkspaceRule = Literal["never", "off", "on", "lower"]
"""What workspace settings may do with a setting. Editors fill workspace settings from a project's
own files (`.vscode/settings.json`, `.code-workspace`, eglot's `.dir-locals.el`, neoconf's
`.neoconf.json`), so whoever wrote the repository writes them, and they may only narrow what
Margin does:

- `never`: only the user's own places set it (the environment, the user settings file, the
  editor's start-up options): where prompts, keys and Margin's files go, which model a key pays
  for, what Margin sends in the user's name, how it counts;
- `off`: a workspace may turn it off, never on;
- `on`: a workspace may turn it on, never off (asking for more confirmation);
- `lower`: a workspace may lower the limit, never raise it (a window it lowers while the user's
  is `auto` caps the window read from the server)."""

WORKSPACE_RULES: tuple[str, ...] = ("never", "off", "on", "lower")


def from_workspace(rule: WorkspaceRule) -> dict[str, Any]:
    """The mark every setting carries (its `json_schema_extra`): what workspace settings may do with
    it. A `never` setting also gets VS Code's `machine` scope (user or remote settings only, never a
    workspace's) and is listed in `restrictedConfigurations` (scripts/generate_vscode_settings.py
    reads this mark)."""
    return {"workspace": rule, "scope": "machine"} if rule == "never" else {"workspace": rule}


USER_ONLY = from_workspace("never")
TURN_OFF = from_workspace("off")
TURN_ON = from_workspace("on")
LOWER = from_workspace("lower")


def workspace_rule(model: type[BaseModel], name: str) -> WorkspaceRule:
    """What workspace settings may do with `model`'s field `name` (a python name). Every field
    carries a rule: one without is a mistake, found when the model is first used."""
    extra = model.model_fields[name].json_schema_extra
    rule = extra.get("workspace") if isinstance(extra, dict) else None
    if rule not in WORKSPACE_RULES:
        raise TypeError(f"{model.__name__}.{name} says nothing of what workspace settings may do with it: "
                        "give it json_schema_extra=from_workspace(...) (margin.core.settings_fields)")
    return rule  # type: ignore[return-value]


def user_only_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The python names (`base_url`) of `model`'s fields only the user's own places may set."""
    return tuple(name for name in model.model_fields if workspace_rule(model, name) == "never")


MODEL_CONFIG = ConfigDict(
    extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
)


class CodeActionPreset(BaseModel):
    """A code action offered on every non-empty selection: `Margin: <title>`."""

    model_config = MODEL_CONFIG

    title: Annotated[str, Field(min_length=1, max_length=80)]
    instruction: Annotated[str, Field(min_length=1)]


DEFAULT_CODE_ACTIONS: tuple[CodeActionPreset, ...] = (
    CodeActionPreset(title="Add docstring", instruction=(
        "Add a docstring (or this language's usual documentation comment) to the code. "
        "Change nothing else.")),
    CodeActionPreset(title="Explain with comments", instruction=(
        "Add brief comments that explain what the code does and why. Do not change the code itself.")),
    CodeActionPreset(title="Simplify", instruction="Simplify the code without changing what it does."),
)


DEFAULT_INSTRUCTION_FILES: tuple[str, ...] = ("AGENTS.md", ".margin/instructions.md", "CLAUDE.md",
                                              ".github/copilot-instructions.md")


def json_names(value: Any) -> Any:
    """A list of names given as text (an environment variable): JSON, or comma-separated."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except ValueError:
                raise ValueError("must be a JSON list of file names, or names separated by commas") from None
        return tuple(name.strip() for name in text.split(",") if name.strip())
    return value


def json_text(value: Any) -> Any:
    """A list given as text (an environment variable) is read as JSON."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError("must be a JSON list of {\"title\", \"instruction\"} objects") from None
    return value


NEXT_EDIT_MODELS = ("sweep", "zeta")
"""names in a model made for next edits (services.next_edit.route_for picks its prompt format)"""


def made_for_next_edits(model: str | None) -> bool:
    return any(name in (model or "").lower() for name in NEXT_EDIT_MODELS)
