"""The README's and the docs' promises that a test can hold them to: the editor snippets in
docs/editors.md are the ones the editor tests run, and the README's quick start is two
commands, the second the one CI runs."""

from __future__ import annotations

import re
import textwrap

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
EDITORS = (REPO / "docs" / "editors.md").read_text(encoding="utf-8")
"""Each editor's set-up in full (the README links to it)."""
LUA = (REPO / "tests" / "e2e" / "nvim" / "sync_check.lua").read_text(encoding="utf-8")


def snippet(name: str) -> str:
    match = re.search(rf"-- README snippet {re.escape(name)} begin\n(.*?)\n\s*-- README snippet {re.escape(name)} end", LUA, re.DOTALL)
    assert match, name
    return textwrap.dedent(match.group(1)).strip()


def test_neovim_snippets_are_the_ones_the_neovim_test_runs():
    for name in ("nvim-0.11", "nvim-0.8"):
        assert f"```lua\n{snippet(name)}\n```" in EDITORS, name


def test_the_emacs_snippet_is_the_one_the_emacs_test_runs():
    init = (REPO / "tests" / "e2e" / "emacs" / "init.el").read_text(encoding="utf-8")
    body = "\n".join(line for line in init.splitlines() if not line.startswith(";;;")).strip()
    assert f"```elisp\n{body}\n```" in EDITORS


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    block = re.search(r"## Quick start.*?```sh\n(.*?)```", README, re.DOTALL).group(1)
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["bash scripts/quickstart.sh", "bash scripts/test.sh"]
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert "bash scripts/test.sh" in ci  # the test command exactly, with no arguments (the whole run's limit)
