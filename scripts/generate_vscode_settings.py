"""Generates the VS Code extension's server settings from the server's settings model.

The pydantic models in server/margin/core/settings.py (ProfileSettings, GlobalSettings, their
field descriptions, BUILTIN_PROFILES and USER_VISIBLE_PROFILES) are the one declaration of
Margin's settings. From them this script writes:

- the `margin.*` server settings in client-vscode/package.json
  (`contributes.configuration.properties`), after the extension's own settings
  (`margin.server.*`, `margin.trace.*`), which are kept as they are; a field marked USER_ONLY
  (where prompts, keys and Margin's files go) gets VS Code's `machine` scope, which no
  workspace can set;
- `capabilities.untrustedWorkspaces` in package.json: Restricted Mode is supported in part, and
  every `machine`-scoped setting (the extension's own ones that start a program included) is a
  restricted configuration, never read from an untrusted workspace;
- client-vscode/src/pure/settingsFields.generated.ts: the blocks and fields the extension
  forwards to the server, and which of them only the user's own settings may set.

    .venv/bin/python scripts/generate_vscode_settings.py           # write both files
    .venv/bin/python scripts/generate_vscode_settings.py --check   # exit 1 if either is stale
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "server"))  # this checkout's model, not an installed copy
sys.path.insert(0, str(REPO / "scripts"))

from pydantic import BaseModel

import generated_files
from margin.core.settings import (
    BUILTIN_PROFILES,
    PROFILES,
    USER_ONLY,
    USER_VISIBLE_PROFILES,
    GlobalSettings,
    ProfileSettings,
)
from margin.core.settings_fields import user_only_fields

PACKAGE_JSON = REPO / "client-vscode" / "package.json"
FIELDS_TS = REPO / "client-vscode" / "src" / "pure" / "settingsFields.generated.ts"
COMMAND = ".venv/bin/python scripts/generate_vscode_settings.py"

CAPABILITIES = {
    "defaults": "every capability (a profile's own setting wins)",
    "completion": "inline completion",
    "edit": "code actions on a selection",
    "chat": "chat",
    "chatOps": "edit-ops (Margin: Edit Selection\u2026)",
    "nextEdit": "next-edit suggestions",
    "agent": "the agent (Margin: Ask the Agent…)",
}
"""What each block's settings are for, as `{capability}` in a profile field's description."""

DEFAULTS_LEFT_OUT = ("enabled", "template")
"""Profile fields the `defaults` block does not offer in VS Code: switching every capability
off at once is not a setting anyone needs, and a template is written for one capability (the
server would still accept either in `defaults`)."""

CLIENT_PREFIXES = ("margin.server.", "margin.trace.")
"""The extension's own settings: kept from package.json as written, first, never sent."""

UNTRUSTED_DESCRIPTION = (
    "In Restricted Mode Margin works as usual with the model servers, keys and files set in your "
    "user settings; the folder's own settings cannot choose the server program, its arguments, a "
    "model server's URL, an API key's variable, the thread database or the prompts folder.")
"""What the extension does in an untrusted folder (VS Code shows it in the Restricted Mode view)."""

WORKSPACE_NOTES = {
    "never": "",  # VS Code shows the machine scope itself
    "off": "A folder's settings may only turn this off.",
    "on": "A folder's settings may only turn this on.",
    "lower": "A folder's settings may only lower this.",
}
"""What each setting's rule (margin.core.settings_fields.WorkspaceRule) lets a folder do, ending
its description."""

FIRST_ORDER = 10  # the extension's own settings take orders 0-9
GLOBALS_ORDER = 90
_UNSET = re.compile(r"(?:^|\s)Unset: [^\n]*\.$")
_KEEP = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
         "pattern")


def blocks() -> tuple[str, ...]:
    return ("defaults", *(p for p in PROFILES if p in USER_VISIBLE_PROFILES))


def _aliases(model: type[BaseModel]) -> dict[str, str]:
    """A model's fields as settings name them (`baseUrl`), each with its Python name."""
    return {info.alias or name: name for name, info in model.model_fields.items()}


def block_fields(block: str) -> list[str]:
    names = list(_aliases(ProfileSettings))
    return [n for n in names if n not in DEFAULTS_LEFT_OUT] if block == "defaults" else names


def _nullable(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A field's JSON schema as a VS Code setting that may also be null (unset)."""
    if "$ref" in schema:
        return _nullable(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    out: dict[str, Any] = {}
    branches = schema.get("anyOf")
    if branches is not None:
        values = [b for b in branches if b.get("type") != "null"]
        if len(values) == 1:  # X | None: one type that may be null
            return _nullable(values[0], defs)
        out["anyOf"] = [_plain(b, defs) for b in values] + [{"type": "null"}]
        return out
    out["type"] = [schema["type"], "null"]
    out.update(_plain(schema, defs, with_type=False))
    return out


def _plain(schema: dict[str, Any], defs: dict[str, Any], with_type: bool = True) -> dict[str, Any]:
    """A JSON schema as VS Code reads it: `const` as a one-value enum, `$ref` resolved, no
    pydantic titles or descriptions, the checks kept."""
    if "$ref" in schema:
        return _plain(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, with_type)
    out: dict[str, Any] = {}
    if with_type and "type" in schema:
        out["type"] = schema["type"]
    if "const" in schema:
        out["enum"] = [schema["const"]]
    if "items" in schema:
        out["items"] = _plain(schema["items"], defs)
    if "properties" in schema:
        out["required"] = schema.get("required", [])
        out["properties"] = {k: _plain(v, defs) for k, v in schema["properties"].items()}
    if schema.get("additionalProperties") is False:
        out["additionalProperties"] = False
    out.update({k: schema[k] for k in _KEEP if k in schema})
    return out


def _shown(value: Any) -> str:
    """A default value as the settings editor shows it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return f"`{value}`"
    if isinstance(value, (list, tuple, dict)) and not value:
        return "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(item["title"] if isinstance(item, dict) else _shown(item) for item in value)
    raise ValueError(f"no way to show the default {value!r}")


def _described(key: str, text: str, defaults: dict[str, Any]) -> str:
    """`text` ending with what unset means: the description's own `Unset: ...` when the default
    is None, else the default itself (per profile when they differ)."""
    values = list(defaults.values())
    if all(v is None for v in values):
        if not _UNSET.search(text):
            raise ValueError(f"{key}: its default is unset, so its description must end by "
                             "saying what unset means ('Unset: ....')")
        return text
    if "Unset:" in text or any(v is None for v in values):
        raise ValueError(f"{key}: a description says 'Unset: ...' only when the default is None")
    shown = {block: _shown(value) for block, value in defaults.items()}
    if len(set(shown.values())) == 1:
        return f"{text} Unset: {next(iter(shown.values()))}."
    each = ", ".join(f"{block} {value}" for block, value in shown.items())
    return f"{text} Unset: each capability's own ({each})."


def _entry(schema: dict[str, Any], defs: dict[str, Any], text: str, order: int) -> dict[str, Any]:
    entry = _nullable(schema, defs)
    entry["default"] = None  # the extension sends only what the user set; the server defaults
    if schema.get("scope"):  # user only: never from a workspace's settings
        entry["scope"] = schema["scope"]
    text = f"{text} {WORKSPACE_NOTES[schema['workspace']]}".rstrip()
    markdown = "`" in text or "**" in text
    entry["markdownDescription" if markdown else "description"] = text
    entry["order"] = order
    return entry


def server_settings() -> dict[str, dict[str, Any]]:
    """Every `margin.*` setting the server reads, as VS Code contributes it, in order."""
    settings: dict[str, dict[str, Any]] = {}
    profile = ProfileSettings.model_json_schema(by_alias=True)
    fields = _aliases(ProfileSettings)
    visible = [p for p in PROFILES if p in USER_VISIBLE_PROFILES]
    for block in blocks():
        # Orders by place in PROFILES, so a profile made visible later slots in between.
        base = FIRST_ORDER + 10 * ("defaults", *PROFILES).index(block)
        for index, name in enumerate(block_fields(block)):
            schema = profile["properties"][name]
            template = schema["description"]
            if "{capability}" not in template:
                raise ValueError(f"ProfileSettings.{fields[name]}: its description must name "
                                 "the capability as {capability}")
            builtin = {p: BUILTIN_PROFILES[p].model_dump(mode="json")[fields[name]]
                       for p in (visible if block == "defaults" else [block])}
            key = f"margin.{block}.{name}"
            text = _described(key, template.replace("{capability}", CAPABILITIES[block]), builtin)
            settings[key] = _entry(schema, profile.get("$defs", {}), text, base + index)
    schema_ = GlobalSettings.model_json_schema(by_alias=True)
    defaults = GlobalSettings().model_dump(mode="json")
    for index, (name, python) in enumerate(_aliases(GlobalSettings).items()):
        key = f"margin.{name}"
        text = _described(key, schema_["properties"][name]["description"], {"": defaults[python]})
        settings[key] = _entry(schema_["properties"][name], schema_.get("$defs", {}), text,
                               GLOBALS_ORDER + index)
    return settings


def package_json(current: str) -> str:
    """package.json with its server settings regenerated; everything else as it was."""
    package = json.loads(current)
    properties = package["contributes"]["configuration"]["properties"]
    own = {k: v for k, v in properties.items() if k.startswith(CLIENT_PREFIXES)}
    properties = package["contributes"]["configuration"]["properties"] = {**own, **server_settings()}
    package["capabilities"] = {"untrustedWorkspaces": {
        "supported": "limited",
        "description": UNTRUSTED_DESCRIPTION,
        "restrictedConfigurations": [k for k, v in properties.items() if v.get("scope") == USER_ONLY["scope"]],
    }}
    return json.dumps(package, indent=2) + "\n"


def fields_ts() -> str:
    """The TypeScript module of what the extension forwards to the server."""

    def const(name: str, values: list[str], doc: str) -> str:
        items = "".join(f"  {json.dumps(v)},\n" for v in values)
        return f"/** {doc} */\nexport const {name} = [\n{items}] as const;\n"

    return "\n".join((
        ("// The server settings the VS Code extension forwards. GENERATED from the server's\n"
        "// settings model (server/margin/core/settings.py) by scripts/generate_vscode_settings.py:\n"
        f"// do not edit; run `{COMMAND}`.\n"),
        const("PROFILES", list(blocks()[1:]),
              "The profiles with a capability users can reach (USER_VISIBLE_PROFILES)."),
        const("BLOCKS", list(blocks()), "Blocks of profile settings: `defaults`, then each profile."),
        const("PROFILE_FIELDS", list(_aliases(ProfileSettings)),
              "The fields of a profile (ProfileSettings)."),
        const("GLOBAL_FIELDS", list(_aliases(GlobalSettings)),
              "Settings of no profile (GlobalSettings)."),
        const("USER_ONLY_PROFILE_FIELDS", _user_only(ProfileSettings),
              "Profile fields only the user's own settings may set (USER_ONLY): sent at start only."),
        const("USER_ONLY_GLOBAL_FIELDS", _user_only(GlobalSettings),
              "Settings of no profile only the user's own settings may set (USER_ONLY): sent at start only."),
    ))


def _user_only(model: type[BaseModel]) -> list[str]:
    names = set(user_only_fields(model))
    return [alias for alias, name in _aliases(model).items() if name in names]


def generated() -> dict[Path, str]:
    """Each generated file and the text it should hold."""
    return {
        PACKAGE_JSON: package_json(PACKAGE_JSON.read_text(encoding="utf-8")),
        FIELDS_TS: fields_ts(),
    }


def stale() -> list[Path]:
    """The generated files whose committed text differs from what this script writes."""
    return generated_files.stale(generated)


def main(argv: list[str] | None = None) -> int:
    return generated_files.main(argv, description=__doc__.splitlines()[0], repo=REPO, command=COMMAND,
                                generated=generated)


if __name__ == "__main__":
    sys.exit(main())
