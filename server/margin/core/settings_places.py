"""Where each setting was set, over the settings sources as margin.core.settings parses them
(`(source name, {block: {python field name: value}})`, earliest first): the values workspace
settings may not set (margin.core.settings.USER_ONLY) left out and named, and where a profile's
`apiKeyEnv` and `baseUrl` in force came from (margin.core.api_keys.KeyRoute)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pydantic.alias_generators import to_camel

from margin.core.api_keys import BUILTIN_PLACE, KeyRoute

_ABSENT = object()

Blocks = dict[str, dict[str, Any]]
Parsed = Sequence[tuple[str, Blocks]]
LeftOut = list[tuple[str, str, Any]]
"""(block, python field name, value) of each value left out; block "globals" for settings of no
profile"""


def leave_out(blocks: Blocks, profile_fields: Collection[str], global_fields: Collection[str]) -> LeftOut:
    """Remove the named fields (python names) from a source's blocks, and say what was removed."""
    removed = []
    for block, values in blocks.items():
        for name in [n for n in values if n in (global_fields if block == "globals" else profile_fields)]:
            removed.append((block, name, values.pop(name)))
    return removed


def notices(left_out: Sequence[tuple[str, LeftOut]], parsed: Parsed) -> tuple[str, ...]:
    """A sentence for each source whose left-out values differ from what the other sources set for
    the same block and field (editors such as Helix send one configuration both at start-up and
    as workspace settings: a copy of a value in force needs no word)."""
    told = []
    for source, items in left_out:
        differing = [(block, name) for block, name, value in items
                     if not any(blocks.get(block, {}).get(name, _ABSENT) == value for _, blocks in parsed)]
        if differing:
            names = ", ".join(to_camel(n) if b == "globals" else f"{b}.{to_camel(n)}" for b, n in differing)
            told.append(f"Margin did not use {names} from {source}: where prompts, API keys and Margin's files "
                        "go is taken only from places a project's files cannot change — the editor's start-up "
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
