"""docs/settings.md is generated from the server's settings model, and the committed file is the
generator's current output: every field of every block, with the environment variable that
really sets it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from margin.core.settings import PROFILES, GlobalSettings, ProfileSettings
from margin.core.settings_state import environment_source
from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "generate_settings_docs.py"
FIX = ".venv/bin/python scripts/generate_settings_docs.py"
DOC = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")


def generator():
    spec = importlib.util.spec_from_file_location("generate_settings_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_settings_docs_are_generated_from_the_model():
    stale = [str(path.relative_to(REPO)) for path in generator().stale()]
    assert not stale, f"{', '.join(stale)} out of date with server/margin/core/settings.py: run {FIX}"


def test_check_mode_exits_zero_when_current():
    run = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr


def test_check_mode_names_a_stale_file(tmp_path, monkeypatch, capsys):
    module = generator()
    monkeypatch.setattr(module, "DOC", tmp_path / "settings.md")
    (tmp_path / "settings.md").write_text("# edited by hand\n", encoding="utf-8")
    monkeypatch.setattr(module, "REPO", tmp_path)
    assert module.main(["--check"]) == 1
    assert "settings.md is out of date" in capsys.readouterr().err


def test_every_field_of_every_block_has_a_row():
    for block in ("defaults", *PROFILES):
        for info in ProfileSettings.model_fields.values():
            assert f"| `{block}.{info.alias}` |" in DOC, (block, info.alias)
    for info in GlobalSettings.model_fields.values():
        assert f"| `{info.alias}` |" in DOC, info.alias


def test_each_environment_variable_shown_sets_its_field():
    env_name = generator().env_name
    for block in ("defaults", *PROFILES):
        for name, info in ProfileSettings.model_fields.items():
            variable = env_name(block, name)
            assert f"`{variable}`" in DOC
            assert info.alias in environment_source({variable: "x"}).values.get(block, {}), variable
    for name, info in GlobalSettings.model_fields.items():
        variable = env_name(None, name)
        assert f"`{variable}`" in DOC
        assert info.alias in environment_source({variable: "x"}).values, variable


def test_the_security_pages_table_of_who_may_set_what_is_the_settings_models():
    """docs/security.md lists every setting under the rule the settings model gives it."""
    import re

    from pydantic.alias_generators import to_camel

    from margin.core.settings import GLOBAL_RULES, PROFILE_RULES

    text = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    rows = {"user only": "never", "off": "off", "on": "on", "lower": "lower"}
    listed: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in rows:
            for name in re.findall(r"`([A-Za-z]+)`", cells[1]):
                listed[name] = rows[cells[0]]
    model = {to_camel(n): r for n, r in {**PROFILE_RULES, **GLOBAL_RULES}.items()}
    assert listed == model
