"""What the `initialize` reply needs from the settings, read from their raw sources without
validating them: no pydantic, no settings models, so the language server answers `initialize`
before loading either (benchmarks/bench_startup.py). The settings are validated right after the
reply (margin.core.settings_state, reporting any problem at `initialized`); where they turn out
to differ from this pre-read, the server catches up as on a later settings change.

Only `completionMenu` is needed (it decides whether `textDocument/completion` is advertised).
It is read as margin.core.settings would read it: the `MARGIN_COMPLETION_MENU` environment
variable beats initializationOptions, a value that is no boolean counts as not set (its whole
source is rejected by the validation), and nothing set means off. What the pre-read cannot see
is a source rejected for another field's invalid value; the validation after the reply settles
that (tests/unit/core/test_settings_preread.py compares the two).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ENV_COMPLETION_MENU = "MARGIN_COMPLETION_MENU"
INIT_COMPLETION_MENU = "completionMenu"

_TRUE = frozenset({"1", "t", "true", "y", "yes", "on"})
_FALSE = frozenset({"0", "f", "false", "n", "no", "off"})


def strict_bool(value: Any) -> bool | None:
    """`value` as a boolean where pydantic's bool (lax mode) takes it — True/False, 1/0 (also
    1.0/0.0) and, in any letter case, the words above — else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return value == 1
    if isinstance(value, str):
        word = value.lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return None


def completion_menu(environ: Mapping[str, str], init_options: Any) -> bool:
    """Whether `completionMenu` is on, by the environment, else the initializationOptions
    (already taken out of a `{"margin": {...}}` wrapper), else off."""
    from_env = strict_bool(environ.get(ENV_COMPLETION_MENU))
    if from_env is not None:
        return from_env
    if isinstance(init_options, Mapping):
        from_init = strict_bool(init_options.get(INIT_COMPLETION_MENU))
        if from_init is not None:
            return from_init
    return False
