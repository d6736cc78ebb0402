"""Generates docs/settings.md, the reference of every setting, from the server's settings model.

The pydantic models in server/margin/core/settings.py (ProfileSettings, GlobalSettings, their
field descriptions, BUILTIN_PROFILES) are the one declaration of Margin's settings; the VS Code
extension's settings are generated from them too (scripts/generate_vscode_settings.py, whose
per-capability wording this reuses). This script writes docs/settings.md: a table per block
(`defaults`, each profile, the settings of no profile) with each setting's key, type, default,
environment variable and description, in the manner of python-lsp-server's CONFIGURATION.md.
How settings are layered and where each may be set is hand-written prose in
docs/configuration.md, which links here.

    .venv/bin/python scripts/generate_settings_docs.py           # write docs/settings.md
    .venv/bin/python scripts/generate_settings_docs.py --check   # exit 1 if it is stale
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

import generate_vscode_settings
import generated_files
from margin.core.settings import BUILTIN_PROFILES, PROFILES, GlobalSettings, ProfileSettings

DOC = REPO / "docs" / "settings.md"
COMMAND = ".venv/bin/python scripts/generate_settings_docs.py"
CAPABILITIES = generate_vscode_settings.CAPABILITIES
RULE_NOTES = {
    "never": "*user only.*",
    "off": "*A workspace may only turn it off.*",
    "on": "*A workspace may only turn it on.*",
    "lower": "*A workspace may only lower it.*",
}
"""How each setting's rule (margin.core.settings_fields.WorkspaceRule) opens its description."""

HEADER = f"""# Settings reference

<!-- GENERATED from server/margin/core/settings.py by scripts/generate_settings_docs.py: do not
edit; run `{COMMAND}`. -->

Every setting Margin reads, generated from the server's settings model. Where settings come
from, which source wins and what a workspace may set are explained in
[Configuration](configuration.md). The keys are as they appear in `initializationOptions`,
Margin's settings file and the `margin` section of workspace settings (VS Code: `margin.` before
the key, e.g. `margin.chat.model`); each can also be set by the environment variable beside it.

A profile's field set in the `defaults` block applies to every profile that does not set it
itself. Workspace settings (which editors fill from a project's own files) may only narrow what
Margin does, and each description starts with what they may do: *user only* marks a setting
Margin takes only from `initializationOptions`, the settings file or the environment, never
from workspace settings; the others a workspace may only turn off, turn on, or lower
([why](configuration.md#what-a-workspace-may-set)).

"""


def _env_block(block: str) -> str:
    """`chatOps` as environment variables spell it: `CHAT_OPS` (margin.core.settings_state)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", block).upper()


def env_name(block: str | None, python_name: str) -> str:
    """The environment variable that sets a field: MARGIN_<BLOCK>_<FIELD>, or MARGIN_<SETTING>
    for a setting of no profile."""
    return "_".join(("MARGIN", *((_env_block(block),) if block else ()), python_name.upper()))


def _aliases(model: type[BaseModel]) -> dict[str, str]:
    return {info.alias or name: name for name, info in model.model_fields.items()}


def _type(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """A field's JSON schema as a short type with its checks: `integer ≥ 1`, `"auto"` or ..."""
    if "$ref" in schema:
        return _type(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        branches = [b for b in schema["anyOf"] if b.get("type") != "null"]
        shown = " or ".join(_type(b, defs) for b in branches)
        return f"{shown} or unset" if len(branches) < len(schema["anyOf"]) else shown
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema['items'], defs)}"
    if kind == "object":
        return "{" + ", ".join(f"`{k}`" for k in schema.get("properties", {})) + "}"
    checks = []
    if "minimum" in schema:
        checks.append(f"≥ {schema['minimum']}")
    if "exclusiveMinimum" in schema:
        checks.append(f"> {schema['exclusiveMinimum']}")
    if "maximum" in schema:
        checks.append(f"≤ {schema['maximum']}")
    return " ".join([str(kind), ", ".join(checks)]).strip()


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(item["title"] if isinstance(item, dict) else f"`{item}`" for item in value)
    return f"`{json.dumps(value)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _described(schema: dict[str, Any], capability: str) -> str:
    text = schema["description"].replace("{capability}", capability)
    return f"{RULE_NOTES[schema['workspace']]} {text}"


def _table(rows: list[tuple[str, ...]]) -> str:
    head = "| key | type | default | environment | description |\n| --- | --- | --- | --- | --- |\n"
    return head + "".join("| " + " | ".join(_cell(c) for c in row) + " |\n" for row in rows)


def document() -> str:
    """docs/settings.md as it should be."""
    profile = ProfileSettings.model_json_schema(by_alias=True)
    fields = _aliases(ProfileSettings)
    parts = [HEADER]

    parts.append("## Profiles\n\nFour profiles, each configured on its own: "
                 + ", ".join(f"`{p}` ({CAPABILITIES[p]})" for p in PROFILES)
                 + ". Their built-in defaults side by side:\n\n")
    parts.append("| field | " + " | ".join(f"`{p}`" for p in PROFILES) + " |\n"
                 + "| --- |" + " --- |" * len(PROFILES) + "\n")
    for alias, python in fields.items():
        values = [_default(BUILTIN_PROFILES[p].model_dump(mode="json")[python]) for p in PROFILES]
        parts.append(f"| `{alias}` | " + " | ".join(_cell(v) for v in values) + " |\n")

    for block in ("defaults", *PROFILES):
        if block == "defaults":
            parts.append("\n### `defaults`\n\nEvery profile field, for every profile at once; a "
                         "profile's own value wins. Nothing is set here by default.\n\n")
        else:
            parts.append(f"\n### `{block}`\n\nThe profile for {CAPABILITIES[block]}.\n\n")
        rows = []
        for alias, python in fields.items():
            schema = profile["properties"][alias]
            default = ("unset" if block == "defaults"
                       else _default(BUILTIN_PROFILES[block].model_dump(mode="json")[python]))
            rows.append((f"`{block}.{alias}`", _type(schema, profile.get("$defs", {})), default,
                         f"`{env_name(block, python)}`",
                         _described(schema, CAPABILITIES[block])))
        parts.append(_table(rows))

    globals_ = GlobalSettings.model_json_schema(by_alias=True)
    defaults = GlobalSettings().model_dump(mode="json")
    parts.append("\n## Settings of no profile\n\nTop-level keys, beside the profile blocks.\n\n")
    rows = []
    for alias, python in _aliases(GlobalSettings).items():
        schema = globals_["properties"][alias]
        rows.append((f"`{alias}`", _type(schema, globals_.get("$defs", {})), _default(defaults[python]),
                     f"`{env_name(None, python)}`", _described(schema, "")))
    parts.append(_table(rows))
    return "".join(parts)


def generated() -> dict[Path, str]:
    return {DOC: document()}


def stale() -> list[Path]:
    return generated_files.stale(generated)


def main(argv: list[str] | None = None) -> int:
    return generated_files.main(argv, description=__doc__.splitlines()[0], repo=REPO, command=COMMAND,
                                generated=generated)


if __name__ == "__main__":
    sys.exit(main())
