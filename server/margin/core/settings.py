"""Settings: four capability profiles resolved from layered sources, validated once.

The user's own sources, later overriding earlier: built-in defaults, the `defaults` block
(inherited by every profile), the user settings file, `initializationOptions` and
`MARGIN_<PROFILE>_<FIELD>` environment variables. A value set for a profile in any source beats a
value from any `defaults` block; among `defaults` blocks, and among profile blocks, the later
source wins. A source that holds an invalid value is rejected whole, with problems that name the
field and the source, and the caller keeps the last good settings.

Workspace settings come last and may only narrow what the others set, each setting by the rule
it is marked with (margin.core.settings_fields.WorkspaceRule): editors fill them from a project's
own files (`.vscode/settings.json`, `.code-workspace`, eglot's `.dir-locals.el`, neoconf's
`.neoconf.json`). They may turn a feature off, lower a limit, ask for confirmation; they never
say where prompts, keys and Margin's files go, which model a key pays for, what Margin sends in
the user's name or how it counts. A value not taken is named in `Settings.notices`. Each profile
carries where its `apiKeyEnv` and `baseUrl` were set (`ProfileSettings.key_route`), for the rule
in margin.core.api_keys.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, create_model
from pydantic.alias_generators import to_camel

from margin.core import settings_places as places
from margin.core.api_keys import KeyRoute
from margin.core.mcp.spec import HELP, McpServer, mcp_servers_value
from margin.core.settings_fields import (
    DEFAULT_CODE_ACTIONS,
    DEFAULT_INSTRUCTION_FILES,
    LOWER,
    MODEL_CONFIG,
    TURN_OFF,
    TURN_ON,
    USER_ONLY,
    BaseUrl,
    CodeActionPreset,
    ContextWindow,
    OptionalName,
    Tokenizer,
    WorkspaceRule,
    json_names,
    json_text,
    made_for_next_edits,
    workspace_rule,
)

PROFILES: tuple[str, ...] = ("completion", "edit", "chat", "chatOps", "nextEdit", "agent")
"""Capability profiles, in the order they are shown."""

USER_VISIBLE_PROFILES: tuple[str, ...] = PROFILES
"""The profiles whose settings editors show (the VS Code extension's settings are generated from
this by scripts/generate_vscode_settings.py): every one has a capability behind it."""

class ProfileSettings(BaseModel):
    """A capability profile, complete: what one kind of request runs with."""

    model_config = MODEL_CONFIG

    # Each description names the capability as `{capability}`, filled in per profile where the
    # description is shown. A field whose default is unset (None) says what unset means, as a
    # last sentence `Unset: ...`; the others leave that to whoever shows the profile's default.
    enabled: Annotated[bool, Field(json_schema_extra=TURN_OFF, description="Turn {capability} on or off.")]
    base_url: Annotated[BaseUrl, Field(json_schema_extra=USER_ONLY, description=(
        "OpenAI-compatible base URL for {capability}, including the API prefix "
        "(`http://127.0.0.1:8080/v1`, `https://api.openai.com/v1`)."))]
    model: Annotated[OptionalName, Field(json_schema_extra=USER_ONLY, description=(
        "Model name for {capability}. Unset: the model server chooses."))]
    api_key_env: Annotated[OptionalName, Field(json_schema_extra=USER_ONLY, description=(
        "Name of the environment variable holding the API key for {capability} "
        "(e.g. `OPENAI_API_KEY`). The key itself never goes in settings, and is sent only to the "
        "base URL set in the same place as this. Unset: no key."))]
    context_window: Annotated[ContextWindow, Field(json_schema_extra=LOWER, description=(
        "Context window in tokens for {capability}, or `auto`: read from the model server "
        "(llama.cpp, vLLM), else the known window of the model, else 4096."))]
    max_output_tokens: Annotated[int, Field(json_schema_extra=LOWER, ge=1, description=(
        "Tokens reserved for the reply in {capability}."))]
    temperature: Annotated[float, Field(json_schema_extra=USER_ONLY, ge=0, le=2, description=(
        "Sampling temperature for {capability}."))]
    timeout_s: Annotated[float, Field(json_schema_extra=LOWER, gt=0, le=3600, description=(
        "Timeout in seconds for {capability}: a plain reply must arrive within it; a streamed "
        "reply must start within it and never stall longer between chunks."))]
    tokenizer: Annotated[Tokenizer, Field(json_schema_extra=USER_ONLY, description=(
        "How tokens are counted for {capability}: `auto`, `tiktoken[:ENCODING]`, "
        "`tekken[:FILE]`, `llama.cpp`, `vllm` or `heuristic`."))]
    template: Annotated[str, Field(json_schema_extra=USER_ONLY, min_length=1, pattern=r"^[A-Za-z0-9_.-]+$", description=(
        "Prompt template id for {capability}: `<id>.md` in the prompts folder, else a shipped "
        "template."))]

    _key_route: KeyRoute | None = PrivateAttr(default=None)
    _window_cap: int | None = PrivateAttr(default=None)

    @property
    def key_route(self) -> KeyRoute | None:
        """Where this profile's `apiKeyEnv` and `baseUrl` were set (None when it was not
        resolved from sources: then no key is sent)."""
        return self._key_route

    def routed(self, route: KeyRoute) -> ProfileSettings:
        """This profile, knowing where its `apiKeyEnv` and `baseUrl` were set."""
        copy = self.model_copy()
        copy._key_route = route
        return copy

    @property
    def window_cap(self) -> int | None:
        """The most tokens of window workspace settings allow while `contextWindow` is `auto`: the
        window read from the server (or the model's known one) is lowered to it, never raised."""
        return self._window_cap

    def capped(self, window: int | None) -> ProfileSettings:
        """This profile with its `auto` window capped at `window` (None: no cap)."""
        copy = self.model_copy()
        copy._window_cap = window
        return copy


PartialProfile = create_model(  # type: ignore[call-overload]
    "PartialProfile",
    __config__=MODEL_CONFIG,
    **{
        name: (info.rebuild_annotation() | None, None)
        for name, info in ProfileSettings.model_fields.items()
    },
)
"""A profile as one source states it: any subset of the fields, each checked as in
ProfileSettings (the two are one definition)."""

_LOCAL = "http://127.0.0.1:8080/v1"

BUILTIN_PROFILES: dict[str, ProfileSettings] = {
    name: ProfileSettings(
        enabled=enabled,
        base_url=_LOCAL,
        model=None,
        api_key_env=None,
        context_window="auto",
        max_output_tokens=tokens,
        temperature=temperature,
        timeout_s=timeout,
        tokenizer="auto",
        template=template,
    )
    for name, enabled, tokens, temperature, timeout, template in (
        ("completion", True, 128, 0.2, 10.0, "completion_v1"),
        ("edit", True, 1024, 0.2, 60.0, "edit_v1"),
        ("chat", True, 1024, 0.7, 120.0, "chat_v1"),
        ("chatOps", True, 2048, 0.2, 120.0, "chat_ops_v1"),
        # Off until turned on (#28): a chat model guessing at every pause would cost more than it gives.
        ("nextEdit", False, 512, 0.0, 10.0, "next_edit_v1"),
        ("agent", True, 1024, 0.2, 120.0, "agent_v1"),
    )
}


class GlobalSettings(BaseModel):
    """Settings that belong to no profile."""

    model_config = MODEL_CONFIG

    # As in ProfileSettings: a field whose default is None says what unset means.
    database: Annotated[OptionalName, Field(json_schema_extra=USER_ONLY, description=(
        "The SQLite file holding chat threads. Unset: threads.db in Margin's user data "
        "folder."))] = None
    thread_ttl_days: Annotated[int, Field(json_schema_extra=USER_ONLY, ge=1, le=36500, description=(
        "Remove threads with no activity for this many days."))] = 30
    prompts_dir: Annotated[OptionalName, Field(json_schema_extra=USER_ONLY, description=(
        "A folder of prompt templates searched before the shipped ones. Unset: only the "
        "shipped ones."))] = None
    confirm_edits: Annotated[bool, Field(json_schema_extra=TURN_ON, description=(
        "Ask before applying Margin's edits: they are marked as needing confirmation, for "
        "editors that support it."))] = False
    apply_edit_timeout_s: Annotated[float, Field(json_schema_extra=LOWER, gt=0, le=600, description=(
        "Seconds to wait for the editor to answer `workspace/applyEdit`."))] = 30.0
    agent_confirm_timeout_s: Annotated[float, Field(json_schema_extra=LOWER, gt=0, le=3600, description="Seconds the agent waits for an answer to a confirmation (an edit, a command) before taking it as a no.")] = 120.0
    agent_run_patterns: Annotated[tuple[str, ...], BeforeValidator(json_names), Field(json_schema_extra=USER_ONLY, description=(
        "Commands the agent may run without asking, as shell-style patterns of a plain command (one program and its arguments, "
        "e.g. `pytest *`); a command with `;`, `&&`, `|`, `$(…)` or redirections is always asked. Still run in the sandbox."))] = ()
    agent_check_command: Annotated[OptionalName, Field(json_schema_extra=USER_ONLY, description=(
        "A command the agent's `diagnostics` tool runs for a file the editor reports no problems for, `{path}` standing for the "
        "file (e.g. `ruff check {path}`): asked and sandboxed like any command it runs. Unset: only the problems the editor reports."))] = None
    agent_turn_timeout_s: Annotated[float, Field(json_schema_extra=LOWER, gt=0, le=86400, description="Seconds an agent turn may take in all before it stops, its steps kept.")] = 1800.0
    mcp_servers: Annotated[dict[str, McpServer], BeforeValidator(mcp_servers_value), Field(json_schema_extra=USER_ONLY, description=HELP["servers"])] = Field(default_factory=dict)
    mcp_tools_share: Annotated[float, Field(json_schema_extra=LOWER, ge=0, le=1, description=HELP["share"])] = 0.05
    mcp_auto_approve_read_only: Annotated[bool, Field(json_schema_extra=USER_ONLY, description=HELP["read_only"])] = False
    mcp_call_timeout_s: Annotated[float, Field(json_schema_extra=LOWER, gt=0, le=3600, description=HELP["call"])] = 60.0
    mcp_start_timeout_s: Annotated[float, Field(json_schema_extra=LOWER, gt=0, le=600, description=HELP["start"])] = 30.0
    code_actions: Annotated[tuple[CodeActionPreset, ...], BeforeValidator(json_text), Field(json_schema_extra=USER_ONLY, description=(
        "Preset code actions offered on a selection, each a title and an instruction; the edit "
        "profile answers them."))] = DEFAULT_CODE_ACTIONS
    completion_menu: Annotated[bool, Field(json_schema_extra=TURN_OFF, description=(
        "Also offer the inline suggestion as an item of the completion menu "
        "(`textDocument/completion`), for editors without inline completion: Helix, coc.nvim, "
        "vim-lsp, Neovim before 0.12. Editors with inline completion do not need it."))] = False
    next_edit_pause_ms: Annotated[int, Field(json_schema_extra=USER_ONLY, ge=0, le=10_000, description=(
        "While next-edit suggestions are on: after a pause this long in typing, Margin asks for "
        "the next edit at the last change, so that it is ready when the editor asks. 0: only "
        "when the editor asks."))] = 400
    instruction_files: Annotated[tuple[str, ...], BeforeValidator(json_names), Field(json_schema_extra=USER_ONLY, description=(
        "Project instruction files shown to chat and edit-ops, nearest the active file last. A "
        "name without a slash is looked for in every folder from the workspace folder down to "
        "the active file's; a path with a slash only under the workspace folder. Files outside "
        "the workspace (or symlinks leaving it) are never read."))] = DEFAULT_INSTRUCTION_FILES
    instructions_max_tokens: Annotated[int, Field(json_schema_extra=LOWER, ge=0, le=100_000, description=(
        "The cap on the instruction files' tokens. Over it, the files farthest from the active "
        "file are cut first, and the budget report names what was cut."))] = 2000
    retrieval: Annotated[bool, Field(json_schema_extra=TURN_OFF, description=(
        "Add snippets of workspace files relevant to each chat and edit-ops message (a local "
        "index of the workspace: no embeddings, nothing leaves the machine but the "
        "snippets sent)."))] = True
    memory_share: Annotated[float, Field(json_schema_extra=LOWER, ge=0, le=0.9, description=(
        "The share of the room the required parts leave that retrieved snippets may fill (more "
        "when the rest of the prompt leaves room unused)."))] = 0.3
    show_requests: Annotated[bool, Field(json_schema_extra=TURN_OFF, description=(
        "Show every request Margin sends to a model, exactly as sent (messages, limits, "
        "schema), in the editor's log (VS Code's **Margin** output) or on the terminal's "
        "stderr. Margin's own log never holds them."))] = False


PartialGlobals = create_model(  # type: ignore[call-overload]
    "PartialGlobals",
    __config__=MODEL_CONFIG,
    **{name: (info.rebuild_annotation() | None, None) for name, info in GlobalSettings.model_fields.items()},
)
_GLOBAL_KEYS = {to_camel(name): name for name in GlobalSettings.model_fields}


class Settings(BaseModel):
    """Everything Margin is configured with, resolved."""

    model_config = ConfigDict(frozen=True)

    profiles: dict[str, ProfileSettings]
    globals: GlobalSettings = GlobalSettings()
    notices: tuple[str, ...] = ()
    """values workspace settings held that were not taken (they would have widened what Margin
    does, or set what only the user may), each a sentence for the user"""

    def profile(self, name: str) -> ProfileSettings:
        return self.profiles[name]


# Keys a client may send in the `margin` section that belong to the client, not the server
# (VS Code's `margin.trace.server`).
_CLIENT_KEYS = frozenset({"trace"})


@dataclass(frozen=True)
class Source:
    """One layer of settings: a name a person recognises and the `margin` section it holds.
    `labels` maps a field path (`chat.temperature`) to what the user actually wrote, when that
    differs (`MARGIN_CHAT_TEMPERATURE`)."""

    name: str
    values: Any
    """the `margin` section as the client sent it: checked to be an object when it is read"""
    labels: Mapping[str, str] = field(default_factory=dict)
    workspace: bool = False
    """workspace settings: what editors send here may come from a project's own files, so it may
    only narrow what the other sources set (margin.core.settings_fields.WorkspaceRule)"""


@dataclass(frozen=True)
class Problem:
    source: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} (from {self.source})"


class SettingsError(ValueError):
    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


def _did_you_mean(name: str) -> str:
    known = [to_camel(field) for field in ProfileSettings.model_fields]
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _problems_from(error: ValidationError, source: Source, prefix: str) -> list[Problem]:
    problems = []
    for item in error.errors():
        path = ".".join([p for p in [prefix, *(str(part) for part in item["loc"])] if p])
        path = source.labels.get(path, path)
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown setting" + _did_you_mean(str(item["loc"][-1]))
        elif item.get("input") is not None and item["type"] != "missing":
            message = f"{message} (got {item['input']!r})"
        problems.append(Problem(source.name, path, message))
    return problems


def _parse_source(source: Source) -> tuple[dict[str, dict[str, Any]], list[Problem]]:
    """A source's blocks as {block: {field: value}} with only the fields it sets; settings that
    belong to no profile go in the block "globals"."""
    blocks: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    if source.values == []:  # an empty object as a Lua table sends it (Neovim's `margin = {}`)
        return {}, []
    if not isinstance(source.values, Mapping):
        return {}, [Problem(source.name, "margin", "must be an object")]
    top = {k: v for k, v in source.values.items() if k in _GLOBAL_KEYS and v is not None}
    if top:
        try:
            blocks["globals"] = PartialGlobals.model_validate(top).model_dump(exclude_none=True)
        except ValidationError as error:
            problems.extend(_problems_from(error, source, ""))
    for key, value in source.values.items():
        if key in _CLIENT_KEYS or key in _GLOBAL_KEYS:
            continue
        if key != "defaults" and key not in PROFILES:
            expected = ", ".join(("defaults", *PROFILES, *_GLOBAL_KEYS))
            problems.append(
                Problem(source.name, key, f"unknown setting (expected one of {expected})")
            )
            continue
        if value is None or value == []:  # not set; or an empty object sent as a Lua table sends it
            continue
        if not isinstance(value, Mapping):
            problems.append(Problem(source.name, key, "must be an object"))
            continue
        try:
            partial = PartialProfile.model_validate(dict(value))
        except ValidationError as error:
            problems.extend(_problems_from(error, source, key))
            continue
        blocks[key] = partial.model_dump(exclude_none=True)
    return blocks, problems


PROFILE_RULES: dict[str, WorkspaceRule] = {name: workspace_rule(ProfileSettings, name) for name in ProfileSettings.model_fields}
GLOBAL_RULES: dict[str, WorkspaceRule] = {name: workspace_rule(GlobalSettings, name) for name in GlobalSettings.model_fields}
"""What workspace settings may do with each setting (python names), read from the models' marks:
a setting without one stops Margin at import."""


def resolve(sources: Sequence[Source]) -> Settings:
    """Built-in defaults overlaid with the user's own `sources` (earliest first), then narrowed
    by the workspace sources, each setting by its rule (PROFILE_RULES, GLOBAL_RULES). Raises
    SettingsError naming every invalid field, with its source."""
    user: list[tuple[str, places.Blocks]] = []
    workspace: list[tuple[str, places.Blocks]] = []
    problems: list[Problem] = []
    for source in sources:
        blocks, found = _parse_source(source)
        (workspace if source.workspace else user).append((source.name, blocks))
        problems.extend(found)
    if problems:
        raise SettingsError(problems)

    refused: list[places.Refused] = []
    profiles = {}
    for name in PROFILES:
        values = BUILTIN_PROFILES[name].model_dump()
        for _, blocks in user:
            values.update(blocks.get("defaults", {}))
        for _, blocks in user:
            values.update(blocks.get(name, {}))
        if name == "nextEdit" and made_for_next_edits(values["model"]) and not any(
                "enabled" in blocks.get(block, {}) for _, blocks in user for block in ("defaults", name)):
            values["enabled"] = True  # naming a model made for next edits turns them on, unless told otherwise
        cap = None
        for place, blocks in workspace:
            for block in ("defaults", name):
                for field_name, wanted in blocks.get(block, {}).items():
                    if field_name == "context_window" and values[field_name] == "auto" and isinstance(wanted, int):
                        cap = wanted if cap is None else min(cap, wanted)  # the window read later is capped
                        continue
                    values[field_name], taken = places.narrowed(values[field_name], wanted, PROFILE_RULES[field_name])
                    if not taken:
                        refused.append(places.Refused(place, block, field_name, wanted))
        route = places.key_route(name, user, BUILTIN_PROFILES[name].base_url)
        profiles[name] = ProfileSettings.model_validate(values).routed(route).capped(cap)
    globals_ = GlobalSettings().model_dump()
    for _, blocks in user:
        globals_.update(blocks.get("globals", {}))
    for place, blocks in workspace:
        for field_name, wanted in blocks.get("globals", {}).items():
            globals_[field_name], taken = places.narrowed(globals_[field_name], wanted, GLOBAL_RULES[field_name])
            if not taken:
                refused.append(places.Refused(place, "globals", field_name, wanted))
    return Settings(profiles=profiles, globals=GlobalSettings.model_validate(globals_),
                    notices=places.notices(refused, user))


BUILTIN = resolve([])
"""The built-in defaults alone."""
