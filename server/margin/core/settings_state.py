"""The settings in force: the layers they come from (the user settings file,
initializationOptions, workspace settings, `MARGIN_<PROFILE>_<FIELD>` environment variables),
resolved over the built-in defaults. An update whose result does not validate is not taken: the
last good settings stay in force. Workspace settings never set where prompts and keys go
(margin.core.settings.USER_ONLY): whatever source the caller gives that layer is read so."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from pydantic.alias_generators import to_camel

from margin.core.settings import (
    BUILTIN,
    PROFILES,
    GlobalSettings,
    Problem,
    ProfileSettings,
    SettingsError,
    Source,
    resolve,
)

_ENV_PREFIX = "MARGIN_"


def _env_name(block: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", block).upper()


_ENV_BLOCK_NAMES = sorted(
    ((_env_name(block), block) for block in ("defaults", *PROFILES)),
    key=lambda pair: len(pair[0]),
    reverse=True,
)
_ENV_FIELDS = {name.upper(): to_camel(name) for name in ProfileSettings.model_fields}
_ENV_GLOBALS = {name.upper(): to_camel(name) for name in GlobalSettings.model_fields}


def environment_source(environ: Mapping[str, str]) -> Source:
    """`MARGIN_<PROFILE>_<FIELD>` variables as a source (e.g. MARGIN_CHAT_OPS_MODEL,
    MARGIN_DEFAULTS_BASE_URL), and MARGIN_<SETTING> for settings of no profile
    (MARGIN_DATABASE, MARGIN_THREAD_TTL_DAYS, MARGIN_PROMPTS_DIR). A variable that names a
    profile and an unknown field is reported as an unknown setting; other MARGIN_ variables are
    not settings and are ignored."""
    values: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for key in sorted(environ):
        if not key.startswith(_ENV_PREFIX):
            continue
        rest = key[len(_ENV_PREFIX) :]
        if rest in _ENV_GLOBALS:
            values[_ENV_GLOBALS[rest]] = environ[key]
            labels[_ENV_GLOBALS[rest]] = key
            continue
        for env_block, block in _ENV_BLOCK_NAMES:
            if rest.startswith(env_block + "_"):
                name = _ENV_FIELDS.get(rest[len(env_block) + 1 :], key)
                values.setdefault(block, {})[name] = environ[key]
                labels[f"{block}.{name}"] = key
                break
    return Source("environment variables", values, labels)


Layer = Literal["file", "init", "workspace", "env"]


class SettingsState:
    """The settings in force, and the layers they come from. An update whose result does not
    validate is not taken: the last good settings stay in force and the problems are returned
    for the user to see. At start, the user settings file (`file`, when there is one) and the
    environment are taken each on its own: an invalid one is left out, its problems kept in
    `startup_problems`."""

    def __init__(self, environ: Mapping[str, str], file: Source | None = None,
                 file_problems: list[Problem] | None = None) -> None:
        self._layers: dict[Layer, Source | None] = {"file": None, "init": None, "workspace": None, "env": None}
        self.startup_problems: list[Problem] = list(file_problems or [])
        self.current = BUILTIN
        for layer, source in (("file", file), ("env", environment_source(environ))):
            if source is not None:
                self.startup_problems.extend(self.update(layer, source))  # type: ignore[arg-type]

    @property
    def file(self) -> Source | None:
        """The user settings file in force, if any."""
        return self._layers["file"]

    def _sources(self) -> list[Source]:
        return [layer for layer in self._layers.values() if layer is not None]

    def update(self, layer: Layer, source: Source) -> list[Problem]:
        if layer == "workspace" and not source.workspace:
            source = replace(source, workspace=True)
        previous = self._layers[layer]
        self._layers[layer] = source
        try:
            self.current = resolve(self._sources())
        except SettingsError as error:
            self._layers[layer] = previous
            return error.problems
        return []
