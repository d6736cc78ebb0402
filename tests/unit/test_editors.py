"""The editor configurations the repository ships (editors/, client-emacs/margin.el) hold what
they promise: the command the package installs, settings Margin knows, method names Margin
registers, and mason-registry's package schema. Neovim's file is run as it is by
tests/e2e/test_neovim.py, margin.el's eglot entry by tests/e2e/test_emacs.py."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest
from pydantic.alias_generators import to_camel

import margin
from margin.core import settings
from margin.lsp import methods
from tests.conftest import REPO

EDITORS = REPO / "editors"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


# --- Helix ------------------------------------------------------------------------------------

def helix() -> dict[str, Any]:
    return tomllib.loads((EDITORS / "helix" / "languages.toml").read_text(encoding="utf-8"))


def test_helix_starts_the_command_the_package_installs():
    server = helix()["language-server"]["margin"]
    assert server["command"] == "margin-lsp" and "margin-lsp" in PYPROJECT["project"]["scripts"]
    assert set(server) <= {"command", "args", "config", "timeout", "environment"}


def test_helix_config_sets_only_settings_margin_has_and_they_are_valid():
    config = helix()["language-server"]["margin"]["config"]
    profile_keys = {to_camel(name) for name in settings.ProfileSettings.model_fields}
    global_keys = {to_camel(name) for name in settings.GlobalSettings.model_fields}
    for key, value in config.items():
        if key in ("defaults", *settings.PROFILES):
            assert set(value) <= profile_keys, (key, set(value) - profile_keys)
        else:
            assert key in global_keys, key
    # Helix has no inline completion: the suggestion comes as a completion item.
    assert config["completionMenu"] is True
    # And Margin takes the whole of it, as the initializationOptions Helix sends.
    resolved = settings.resolve([settings.Source("initializationOptions", config)])
    assert resolved.globals.completion_menu is True
    assert resolved.profile("chat").base_url == config["defaults"]["baseUrl"]


def test_helix_adds_margin_after_each_languages_usual_server():
    languages = helix()["language"]
    assert languages and {language["name"] for language in languages} >= {"python"}
    for language in languages:
        servers = language["language-servers"]
        assert servers[-1] == "margin" and len(servers) >= 2, language["name"]


# --- Emacs ------------------------------------------------------------------------------------

MARGIN_EL = (REPO / "client-emacs" / "margin.el").read_text(encoding="utf-8")


def test_every_margin_method_margin_el_names_is_one_margin_registers():
    # As keywords (:margin/chat) in the requests it sends, and in its comments and docstrings.
    named = set(re.findall(r"(?<![\w/.-])(margin/[A-Za-z]+)", MARGIN_EL))
    sent = set(re.findall(r":(margin/[A-Za-z]+)", MARGIN_EL))
    registered = {method.name for method in methods.ALL}
    assert sent and sent <= named
    assert named <= registered, named - registered
    assert sent == {"margin/chat", "margin/explain", "margin/editOps", "margin/applyOps", "margin/status", "margin/agent"}


def test_margin_el_has_the_eglot_entry_for_margin_lsp():
    assert re.search(r'\(defcustom margin-server-program \'\("margin-lsp"\)', MARGIN_EL)
    assert "(add-to-list 'eglot-server-programs entry)" in MARGIN_EL
    assert "(defun margin-eglot-setup ()" in MARGIN_EL


# --- Mason ------------------------------------------------------------------------------------

def load_yaml_subset(text: str) -> dict[str, Any]:
    """YAML as mason-registry's package.yaml files are written: block mappings and sequences of
    plain scalars, two spaces an indent. Anything else fails, so the file stays in that form
    (PyYAML is not a dependency)."""
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.strip() == "---" or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        assert indent % 2 == 0 and "\t" not in raw, f"line {number}: indent"
        lines.append((number, indent, raw.strip()))

    def scalar(number: int, value: str) -> str:
        assert not re.search(r"(: |\s#|^[\[{&*!|>'\"%@`])", value), f"line {number}: not a plain scalar: {value!r}"
        return value

    def block(i: int, indent: int) -> tuple[Any, int]:
        if lines[i][2].startswith("- "):
            items = []
            while i < len(lines) and lines[i][1] == indent and lines[i][2].startswith("- "):
                items.append(scalar(lines[i][0], lines[i][2][2:]))
                i += 1
            return items, i
        mapping: dict[str, Any] = {}
        while i < len(lines) and lines[i][1] == indent:
            number, _, line = lines[i]
            match = re.fullmatch(r"([A-Za-z0-9_.-]+):(?: (.+))?", line)
            assert match, f"line {number}: not `key: value`"
            key, value = match.groups()
            assert key not in mapping, f"line {number}: {key} twice"
            i += 1
            if value is not None:
                mapping[key] = scalar(number, value)
            else:
                assert i < len(lines) and lines[i][1] == indent + 2, f"line {number}: {key} has no block"
                mapping[key], i = block(i, indent + 2)
        return mapping, i

    parsed, end = block(0, 0)
    assert end == len(lines), f"line {lines[end][0]}: indented wrongly"
    return parsed


def mason() -> dict[str, Any]:
    return load_yaml_subset((EDITORS / "mason" / "package.yaml").read_text(encoding="utf-8"))


def test_mason_package_installs_this_version_of_the_pypi_package():
    package = mason()
    assert package["name"] == PYPROJECT["project"]["name"] == "margin-lsp"
    # mason-registry pins each package's version; bump it with the release.
    assert package["source"] == {"id": f"pkg:pypi/margin-lsp@{margin.__version__}"}
    assert package["bin"] == {"margin-lsp": "pypi:margin-lsp"}
    assert "margin-lsp" in PYPROJECT["project"]["scripts"]


def test_mason_package_has_mason_registry_fields():
    package = mason()
    assert set(package) == {"name", "description", "homepage", "licenses", "languages", "categories",
                            "source", "bin"}
    assert package["categories"] == ["LSP"]
    assert package["licenses"] == [PYPROJECT["project"]["license"]["text"]] == ["MIT"]
    assert "Python" in package["languages"] and package["languages"] == sorted(package["languages"])
    assert package["homepage"].startswith("https://")
    assert package["description"].endswith(".") and len(package["description"]) < 200


@pytest.mark.parametrize("text, problem", [
    ("name: a\n bin: b\n", "indent"),
    ("name: a\nbin:\n", "has no block"),
    ("description: a: b\n", "not a plain scalar"),
    ("name: a\nname: b\n", "twice"),
    ("languages:\n  - Python\n    - Go\n", "indented wrongly"),
])
def test_the_yaml_check_refuses_what_it_does_not_read(text, problem):
    with pytest.raises(AssertionError, match=problem):
        load_yaml_subset(text)


# --- Neovim -----------------------------------------------------------------------------------

def test_neovim_file_is_an_lsp_config_that_runs_margin_lsp():
    lua = (EDITORS / "nvim" / "lsp" / "margin.lua").read_text(encoding="utf-8")
    assert "\nreturn {\n  cmd = { 'margin-lsp' },\n" in lua
    for field in ("filetypes", "root_markers", "settings"):
        assert f"\n  {field} = " in lua, field
    assert "'python'" in lua
