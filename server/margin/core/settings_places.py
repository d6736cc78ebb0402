"""Where each setting was set, over the settings sources as margin.core.settings parses them
(`(source name, {block: {python field name: value}})`, earliest first): how workspace settings
narrow a value (margin.core.settings_fields.WorkspaceRule), the values they held that were not
taken, named for the user, and where a profile's `apiKeyEnv` and `baseUrl` in force came from
(margin.core.api_keys.KeyRoute)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from pydantic.alias_generators import to_camel

from margin.core.api_keys import BUILTIN_PLACE, KeyRoute
from margin.core.settings_fields import WorkspaceRule

_ABSENT = object()

Blocks = dict[str, dict[str, Any]]
Parsed = Sequence[tuple[str, Blocks]]


class Refused(NamedTuple):
    """A value workspace settings held that was not taken: it would have widened what Margin does,
    or it set what only the user may. Block "globals" for settings of no profile."""

    source: str
    block: str
    name: str
    """python field name"""
    value: Any


def narrowed(current: Any, wanted: Any, rule: WorkspaceRule) -> tuple[Any, bool]:
    """The value in force after workspace settings ask for `wanted`, and whether the ask was taken
    (asking for the value in force is)."""
    if wanted == current:
        return current, True
    if rule == "off" and wanted is False:
        return False, True
    if rule == "on" and wanted is True:
        return True, True
    if rule == "lower" and _number(current) and _number(wanted) and wanted < current:
        return wanted, True
    return current, False


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def notices(refused: Sequence[Refused], user: Parsed) -> tuple[str, ...]:
    """A sentence for each source whose values were not taken — leaving out a copy of what the
    user's own places set for the same block (editors such as Helix send one configuration both at
    start-up and as workspace settings: a copy needs no word)."""
    told = []
    for source in dict.fromkeys(r.source for r in refused):
        names = dict.fromkeys(
            to_camel(r.name) if r.block == "globals" else f"{r.block}.{to_camel(r.name)}"
            for r in refused if r.source == source
            and not any(blocks.get(r.block, {}).get(r.name, _ABSENT) == r.value for _, blocks in user))
        if names:
            told.append(f"Margin did not use {', '.join(names)} from {source}: a project's settings may only narrow "
                        "what Margin does (turn a feature off, lower a limit, ask for confirmation). Where prompts, "
                        "API keys and Margin's files go, which model and limits a key pays for and what is sent in "
                        "your name come only from places a project's files cannot change — the editor's start-up "
                        "options (initializationOptions), Margin's settings file, or MARGIN_ environment "
                        "variables. Set it there (see docs/security.md).")
    return tuple(told)


def key_route(profile: str, parsed: Parsed, builtin_base_url: str) -> KeyRoute:
    """Where the profile's `apiKeyEnv` and `baseUrl` in force were set, and the base URL the place
    naming the variable configures for the profile (its own block's, else its defaults block's,
    else the built-in one)."""

    def set_in(name: str) -> str:
        for block in (profile, "defaults"):  # a profile's own value beats any defaults block
            for source, blocks in reversed(parsed):
                if name in blocks.get(block, {}):
                    return source
        return BUILTIN_PLACE

    named_in = set_in("api_key_env")
    own = next((blocks[block]["base_url"] for source, blocks in parsed if source == named_in
                for block in (profile, "defaults") if "base_url" in blocks.get(block, {})), builtin_base_url)
    return KeyRoute(named_in=named_in, base_url_from=set_in("base_url"), own_base_url=own)
