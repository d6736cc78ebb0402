"""The VS Code extension's server settings are generated from the server's settings model, and
the committed files are the generator's current output."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

from margin.core.settings import PROFILES, USER_VISIBLE_PROFILES, GlobalSettings, ProfileSettings
from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "generate_vscode_settings.py"
FIX = ".venv/bin/python scripts/generate_vscode_settings.py"


def generator():
    spec = importlib.util.spec_from_file_location("generate_vscode_settings", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def contributed() -> dict[str, dict]:
    package = json.loads((REPO / "client-vscode" / "package.json").read_text(encoding="utf-8"))
    return package["contributes"]["configuration"]["properties"]


def aliases(model) -> list[str]:
    return [info.alias for info in model.model_fields.values()]


def test_committed_vscode_settings_are_generated_from_the_model():
    stale = [str(path.relative_to(REPO)) for path in generator().stale()]
    assert not stale, f"{', '.join(stale)} out of date with server/margin/core/settings.py: run {FIX}"


def test_check_mode_exits_zero_when_current():
    run = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr


def test_every_profile_has_its_settings_shown_now_that_inline_completion_ships():
    assert USER_VISIBLE_PROFILES == PROFILES
    keys = contributed()
    assert "margin.completion.maxOutputTokens" in keys and "margin.completionMenu" in keys
    assert "inline completion" in keys["margin.completion.enabled"]["description"]


def test_every_field_is_contributed_for_every_visible_block():
    keys = set(contributed())
    left_out = generator().DEFAULTS_LEFT_OUT
    missing = [f"margin.{block}.{name}" for block in USER_VISIBLE_PROFILES
               for name in aliases(ProfileSettings) if f"margin.{block}.{name}" not in keys]
    missing += [f"margin.defaults.{name}" for name in aliases(ProfileSettings)
                if name not in left_out and f"margin.defaults.{name}" not in keys]
    missing += [f"margin.{name}" for name in aliases(GlobalSettings) if f"margin.{name}" not in keys]
    assert missing == []


def test_server_settings_default_to_unset_and_say_what_unset_means():
    for key, entry in contributed().items():
        if key.startswith(("margin.server.", "margin.trace.")):
            continue
        assert entry["default"] is None, key
        text = entry.get("description") or entry.get("markdownDescription")
        assert "Unset: " in text and text.endswith("."), key
        assert "{capability}" not in text, key


def test_no_workspace_can_say_where_prompts_and_keys_go_or_which_program_runs():
    """A repository's .vscode/settings.json cannot set them (VS Code's `machine` scope), and an
    untrusted folder's values are ignored for them (restrictedConfigurations): every setting the
    settings model marks as only the user's, and the program that runs the server."""
    from pydantic.alias_generators import to_camel

    from margin.core.settings import GlobalSettings, ProfileSettings
    from margin.core.settings_fields import user_only_fields

    keys = contributed()
    mine = [to_camel(name) for name in user_only_fields(ProfileSettings)]
    assert {"baseUrl", "apiKeyEnv", "model"} <= set(mine)
    user_only = [f"margin.{block}.{name}" for block in generator().blocks() for name in generator().block_fields(block)
                 if name in mine]
    user_only += [f"margin.{to_camel(name)}" for name in user_only_fields(GlobalSettings)]
    assert {"margin.database", "margin.promptsDir", "margin.codeActions", "margin.instructionFiles"} <= set(user_only)
    launch = ["margin.server.command", "margin.server.pythonPath", "margin.server.args"]
    machine = sorted(k for k, v in keys.items() if v.get("scope") == "machine")
    assert machine == sorted(user_only + launch)
    package = json.loads((REPO / "client-vscode" / "package.json").read_text(encoding="utf-8"))
    untrusted = package["capabilities"]["untrustedWorkspaces"]
    assert untrusted["supported"] == "limited" and "Restricted Mode" in untrusted["description"]
    assert sorted(untrusted["restrictedConfigurations"]) == machine
    # Everything else a folder may only narrow, and its description says how.
    server_keys = [k for k in keys if not k.startswith(("margin.server.", "margin.trace."))]
    for key in (k for k in server_keys if k not in machine):
        assert "scope" not in keys[key], key
        text = keys[key].get("markdownDescription") or keys[key]["description"]
        assert "A folder's settings may only " in text, key
