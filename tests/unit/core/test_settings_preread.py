"""The pre-read of `completionMenu` (margin.core.settings_preread), which the `initialize` reply
uses before the settings are validated, agrees with the validated settings (margin.core.settings)
whenever nothing else in its sources is invalid: the same precedence, the same booleans."""

from __future__ import annotations

import itertools

import pytest

from margin.core.settings import Source
from margin.core.settings_preread import ENV_COMPLETION_MENU, INIT_COMPLETION_MENU, completion_menu, strict_bool
from margin.core.settings_state import SettingsState

ENV_VALUES = [None, "true", "FALSE", "1", "0", "yes", "Off", "t", "n", "", " true", "maybe", "2"]
INIT_VALUES = [None, True, False, 1, 0, 1.0, 0.0, 2, 0.5, "on", "No", "y", "", "enabled", [], {}]
ABSENT = object()


def validated(env_value: str | None, init_value: object) -> bool:
    """`completionMenu` as the server holds it once the settings are resolved."""
    state = SettingsState({} if env_value is None else {ENV_COMPLETION_MENU: env_value})
    if init_value is not ABSENT:
        state.update("init", Source("initializationOptions", {INIT_COMPLETION_MENU: init_value}))
    return state.current.globals.completion_menu


@pytest.mark.parametrize(("env_value", "init_value"), list(itertools.product(ENV_VALUES, [*INIT_VALUES, ABSENT])))
def test_the_pre_read_agrees_with_the_validated_settings(env_value, init_value):
    environ = {} if env_value is None else {ENV_COMPLETION_MENU: env_value}
    options = {} if init_value is ABSENT else {INIT_COMPLETION_MENU: init_value}
    assert completion_menu(environ, options) is validated(env_value, init_value)


def test_options_that_are_no_object_mean_off():
    assert completion_menu({}, None) is False
    assert completion_menu({}, ["completionMenu"]) is False
    assert completion_menu({ENV_COMPLETION_MENU: "on"}, "junk") is True


def test_strict_bool_names_what_is_no_boolean():
    assert [strict_bool(v) for v in (True, "Yes", 0, "off")] == [True, True, False, False]
    assert [strict_bool(v) for v in (None, "", "maybe", 2, 0.5, [])] == [None] * 6
