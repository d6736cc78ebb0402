"""The user settings file: the same object as the editor's `margin` section, in a JSON file only
the user writes — `--settings FILE` (the terminal), else $MARGIN_SETTINGS, else `settings.json`
in Margin's user config folder (on Linux `~/.config/margin/`). Both the terminal and the language
server read it; it is the place for API keys' variables and base URLs that no project's files can
change (docs/security.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import platformdirs

from margin.core.settings import Problem, Source

ENV_SETTINGS = "MARGIN_SETTINGS"


def default_path() -> Path:
    return Path(platformdirs.user_config_dir("margin")) / "settings.json"


def read(environ: Mapping[str, str], explicit: str | None = None) -> tuple[Source | None, list[Problem]]:
    """The settings file as a source (None when there is none), or the problem that kept it out:
    a file named by `explicit` or $MARGIN_SETTINGS that does not exist, or one that cannot be
    read as a JSON object."""
    named = explicit or environ.get(ENV_SETTINGS)
    path = Path(named).expanduser() if named else default_path()
    label = f"settings file {path}"
    if not path.exists():
        return None, ([Problem(label, "margin", "the file does not exist")] if named else [])
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return None, [Problem(label, "margin", f"cannot be read: {error}")]
    if isinstance(values, dict) and isinstance(values.get("margin"), dict):
        values = values["margin"]
    return Source(label, values), []
