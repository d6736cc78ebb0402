"""Every relative link and `#anchor` in the README and docs/ resolves, as GitHub renders them, and
every command the README's quick start and install sections quote is one that exists."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "editors" / "README.md"]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1, with inline code spans blanked."""
    lines, fence = [], ""
    for number, line in enumerate(text.splitlines(), 1):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) \
                    and not line.strip()[len(opened.group(1)):].strip():
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        lines.append((number, _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)))
    return lines


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: the text without Markdown, lowercase, every
    character but letters, digits, `_`, `-` and spaces dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*\*|__|\*|_)(.+?)\1", r"\2", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown page's headings, duplicates numbered -1, -2, ... as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    raw = text.splitlines()
    for number, _ in prose_lines(text):
        heading = _HEADING.match(raw[number - 1])
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, text: str | None = None) -> list[str]:
    """Each relative link or anchor on `page` that does not resolve, as `page:line: target`."""
    text = page.read_text(encoding="utf-8") if text is None else text
    problems = []
    for number, line in prose_lines(text):
        for match in _LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            where = f"{page.relative_to(REPO) if page.is_relative_to(REPO) else page}:{number}: {target}"
            resolved = (page.parent / path).resolve() if path else page
            if path and not resolved.exists():
                problems.append(f"{where} (no such file)")
                continue
            if anchor and resolved.suffix == ".md":
                own = text if resolved == page else resolved.read_text(encoding="utf-8")
                if anchor not in anchors(own):
                    problems.append(f"{where} (no such heading)")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(page):
    assert broken_links(page) == []


def test_the_checker_finds_a_broken_link_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## Set-up: the `margin` command\n", encoding="utf-8")
    page = tmp_path / "page.md"
    text = ("# Page\n\n## Quick start\n\n## Quick start\n\n"
            "[ok](other.md#set-up-the-margin-command) [ok](#quick-start-1) [ok](#page)\n"
            "[web](https://example.com/missing) `[code](nowhere.md)`\n"
            "```md\n[fenced](nowhere.md)\n```\n"
            "[gone](missing.md) [no heading](other.md#set-up) [own](#quick-start-2)\n")
    problems = broken_links(page, text)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "missing.md (no such file)", "other.md#set-up (no such heading)", "#quick-start-2 (no such heading)"]


def test_anchors_are_slugged_as_github_does():
    assert slug("Neovim 0.8 – 0.10") == "neovim-08--010"
    assert slug("Emacs (eglot)") == "emacs-eglot"
    assert slug("The `margin` command") == "the-margin-command"
    assert slug("Where prompts and keys go") == "where-prompts-and-keys-go"
    assert anchors("# A\n## A\n```\n# A\n```\n## A\n") == {"a", "a-1", "a-2"}


# --- the commands the README tells a newcomer to run -----------------------------------------

README = (REPO / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.DOTALL | re.MULTILINE)
    assert match, title
    return match.group(1)


def commands(title: str) -> list[list[str]]:
    """Each command line of the section's `sh` blocks, split as the shell splits it (comments
    dropped; `<version>` kept as a word)."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", section(title), re.DOTALL):
        for line in block.splitlines():
            if line.strip():
                found.append(shlex.split(line.replace("<version>", "VERSION"), comments=True))
    return found


def test_quick_start_and_install_name_only_commands_that_exist():
    quick, install = commands("Quick start"), commands("Install")
    assert quick and install
    scripts = PYPROJECT["project"]["scripts"]
    for words in quick + install:
        if words[0] == "bash":
            assert (REPO / words[1]).is_file(), words
        elif words[0] == "uv":
            # The installed-wheel test runs uv's own commands the way the README does.
            wheel_test = (REPO / "tests" / "e2e" / "test_installed_wheel.py").read_text(encoding="utf-8")
            assert f'run_or_fail("uv {words[1]}' in wheel_test, words
        else:
            assert words[0] in scripts, words
    assert ["bash", "scripts/test.sh"] in quick
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "bash scripts/test.sh" in ci  # the README's test command, exactly, as a line of its own


def test_the_install_section_names_the_wheel_uv_builds_and_an_option_margin_lsp_takes():
    name = PYPROJECT["project"]["name"].replace("-", "_")
    install = commands("Install")
    # the wheel's tag is the interpreter's and platform's with the C tokeniser, py3-none-any without
    assert ["uv", "tool", "install", f"dist/{name}-VERSION-*.whl"] in install
    assert ["margin-lsp", "--version"] in install
    main = (REPO / "server" / "margin" / "lsp" / "main.py").read_text(encoding="utf-8")
    assert 'add_argument("--version"' in main
