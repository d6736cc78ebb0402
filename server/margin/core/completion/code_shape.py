"""What completion post-processing needs to know about code text, by language: its indentation
style, its brackets and quotes (outside comments), and which lines open or close a block."""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

TAB_WIDTH = 4
"""Columns a tab counts for when indentation widths are compared."""

CLOSERS = frozenset(")]}\"'`;,")
"""Characters an editor auto-inserts after the cursor (closing brackets and quotes), plus `;`
and `,` that snippets and auto-close often leave behind them."""

_PAIRS = {")": "(", "]": "[", "}": "{"}
_BRACE = frozenset({
    "c", "cpp", "cuda-cpp", "objective-c", "objective-cpp", "csharp", "java", "javascript",
    "javascriptreact", "typescript", "typescriptreact", "rust", "go", "kotlin", "swift", "php",
    "scala", "dart", "groovy", "zig", "json", "jsonc", "css", "scss", "less", "glsl", "hlsl"})
_HASH_COMMENT = frozenset({
    "python", "ruby", "shellscript", "sh", "bash", "zsh", "perl", "r", "yaml", "toml", "makefile",
    "dockerfile", "elixir", "julia", "coffeescript", "powershell", "nim", "crystal"})
_DASH_COMMENT = frozenset({"lua", "sql", "haskell", "elm", "ada"})
_BACKTICK_STRINGS = frozenset({
    "javascript", "javascriptreact", "typescript", "typescriptreact", "go", "kotlin"})
_TRIPLE_QUOTES = frozenset({"python", "kotlin", "java", "swift", "scala", "julia", "toml"})
_END_KEYWORD = {"lua": r"end|until", "ruby": r"end", "elixir": r"end", "julia": r"end",
                "crystal": r"end", "shellscript": r"fi|done|esac", "sh": r"fi|done|esac",
                "bash": r"fi|done|esac"}
_OPENS = {
    "python": r":",
    "lua": r"\b(?:then|do|else|repeat)|\bfunction\b.*\)",
    "ruby": r"\b(?:do|then|else|begin)(?:\s*\|[^|]*\|)?",
    "shellscript": r"\b(?:then|do|else)", "sh": r"\b(?:then|do|else)", "bash": r"\b(?:then|do|else)",
}
_REOPENS = {
    "python": r"(?:else|elif\b.*|except\b.*|finally|try):",
    "lua": r"else|elseif\b.*\bthen",
    "ruby": r"else|elsif\b.*|rescue\b.*|ensure",
}
_RUST_CHAR = re.compile(r"'(?:\\.[^']{0,8}|[^\\'])'")


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def width(whitespace: str) -> int:
    return len(whitespace) + (TAB_WIDTH - 1) * whitespace.count("\t")


def line_width(line: str) -> int:
    return width(indent_of(line))


@dataclass(frozen=True)
class IndentStyle:
    tabs: bool
    unit: int
    """spaces per level (1 for tabs)"""

    def levels(self, n: int) -> str:
        return "\t" * n if self.tabs else " " * (self.unit * n)

    @property
    def columns(self) -> int:
        return TAB_WIDTH if self.tabs else self.unit


def detect_indent(text: str) -> IndentStyle | None:
    """The indentation `text` uses: tabs when more lines start with a tab than with spaces,
    otherwise spaces, as many per level as the most common step inwards between consecutive
    lines. None when no line is indented."""
    tab_lines = space_lines = 0
    steps: Counter[int] = Counter()
    previous = 0
    for line in text.split("\n"):
        if not line.strip():
            continue
        lead = indent_of(line)
        if lead.startswith("\t"):
            tab_lines += 1
        elif lead:
            if line.lstrip().startswith("*"):  # a block comment's continuation, aligned by one
                continue
            space_lines += 1
        columns = width(lead)
        if not lead.startswith("\t") and columns - previous in (2, 3, 4, 8):
            steps[columns - previous] += 1
        previous = columns
    if not tab_lines and not space_lines:
        return None
    if tab_lines > space_lines:
        return IndentStyle(True, 1)
    return IndentStyle(False, steps.most_common(1)[0][0] if steps else 4)


@functools.lru_cache(maxsize=16)
def detect_indent_cached(text: str) -> IndentStyle | None:
    """detect_indent, remembered: the lines above the cursor's do not change while the user
    types along a line."""
    return detect_indent(text)


def _comment_markers(language: str) -> tuple[str, ...]:
    if language in _HASH_COMMENT:
        return ("#",)
    if language in _DASH_COMMENT:
        return ("--",)
    if language == "php":
        return ("//", "#")
    return ("//",)


class Brackets:
    """Brackets, quotes and block comments open at a point, fed text left to right. Line
    comments are skipped; a single-quoted or double-quoted string ends at its line's end even
    when unterminated (so one stray quote cannot swallow the rest), a triple-quoted or backtick
    string does not."""

    def __init__(self, language: str, stack: tuple[str, ...] = (), strings: bool = True):
        self.language = language
        self.strings = strings
        """False: quotes are ordinary characters (only brackets and comments are followed)"""
        self.stack: list[str] = list(stack)
        self.depth = 0
        """brackets opened minus closed (negative: closed more than it opened)"""
        self.floor = len(self.stack)
        """the fewest entries open at any point: those below it were never closed"""
        self.strays = 0
        """closing brackets that closed nothing, or the wrong kind"""
        self.unterminated = 0
        """strings cut off by the end of their line"""
        self.comment_at = -1
        """where a comment began in the text fed last (-1: none)"""
        self._comments = _comment_markers(language)
        self._block_comments = language not in _HASH_COMMENT and language not in _DASH_COMMENT

    def _pop(self) -> str:
        entry = self.stack.pop()
        self.floor = min(self.floor, len(self.stack))
        return entry

    def feed(self, text: str) -> None:
        self.comment_at = -1
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            top = self.stack[-1] if self.stack else ""
            if top == "/*":
                end = text.find("*/", i)
                if end < 0:
                    return
                self._pop()
                i = end + 2
            elif top[:1] in ("\"", "'", "`"):  # inside a string
                if c == "\\":
                    i += 2
                elif text.startswith(top, i):
                    self._pop()
                    i += len(top)
                elif c == "\n" and top in ("'", '"'):
                    self._pop()
                    self.unterminated += 1
                    i += 1
                else:
                    i += 1
            elif any(text.startswith(m, i) for m in self._comments):
                self.comment_at = i if self.comment_at < 0 else self.comment_at
                end = text.find("\n", i)
                i = n if end < 0 else end
            elif self._block_comments and text.startswith("/*", i):
                self.comment_at = i if self.comment_at < 0 else self.comment_at
                self.stack.append("/*")
                i += 2
            elif c in "\"'`" and self._opens_string(text, i):
                triple = self.language in _TRIPLE_QUOTES and text.startswith(c * 3, i)
                self.stack.append(c * 3 if triple else c)
                i += len(self.stack[-1])
            else:
                if c in "([{":
                    self.stack.append(c)
                    self.depth += 1
                elif c in _PAIRS:
                    self.depth -= 1
                    if top == _PAIRS[c]:
                        self._pop()
                    else:
                        self.strays += 1
                i += 1

    def _opens_string(self, text: str, i: int) -> bool:
        c = text[i]
        if not self.strings:
            return False
        if c == "`":
            return self.language in _BACKTICK_STRINGS
        if c == "'" and self.language == "rust":  # a lifetime is not a string
            return bool(_RUST_CHAR.match(text, i))
        return True

    @property
    def open_brackets(self) -> int:
        return sum(1 for entry in self.stack if entry in "([{")


def state_at(text: str, language: str) -> tuple[str, ...]:
    """What is open at the end of `text`: brackets, strings, a block comment."""
    scanner = Brackets(language)
    scanner.feed(text)
    return tuple(scanner.stack)


def misfit(state: tuple[str, ...], line: str, reference: str, after: str, language: str) -> int:
    """How badly `line` fits where `state` is open before it, `reference` being that line as the
    document has it and `after` the lines that follow: closers that close nothing or the wrong
    thing, strings cut off by the line's end, more strings left open at its end than the
    reference leaves, and brackets left open after `after` (where quotes are not followed: a
    string there may open or close anywhere)."""
    mine, theirs = Brackets(language, state), Brackets(language, state)
    mine.feed(line + "\n")
    theirs.feed(reference + "\n")

    def strings(scanner: Brackets) -> int:
        return sum(1 for entry in scanner.stack[scanner.floor:] if entry not in "([{")

    untouched = sum(1 for entry in mine.stack[: mine.floor] if entry in "([{")
    rest = Brackets(language, tuple(e for e in mine.stack if e in "([{"), strings=False)
    rest.floor = untouched
    rest.feed(after)
    return (mine.strays + mine.unterminated + max(strings(mine) - strings(theirs), 0)
            + rest.strays + len(rest.stack) - rest.floor)


def code_part(line: str, language: str) -> str:
    """`line` without its trailing comment and trailing whitespace."""
    scanner = Brackets(language)
    scanner.feed(line)
    return (line[: scanner.comment_at] if scanner.comment_at >= 0 else line).rstrip()


def opens_block(line: str, language: str) -> bool:
    """Whether the lines after `line` belong to a block it opens (one level deeper): it ends
    with an opening bracket, `:` in Python, `=>`, a `case` label, `then`/`do` in Lua, Ruby and
    shell, or leaves a bracket open."""
    code = code_part(line, language).strip()
    if not code:
        return False
    if code[-1] in "([{" or code.endswith("=>"):
        return True
    if language in _OPENS and re.search(f"(?:{_OPENS[language]})$", code):
        return True
    if language in _BRACE and re.match(r"(?:case\b.*|default\s*):$", code):
        return True
    scanner = Brackets(language)
    scanner.feed(code)
    return scanner.open_brackets > 0


def closes_block(line: str, language: str) -> bool:
    """Whether `line` starts by closing a block: a closing bracket, or `end` and its kin."""
    code = line.strip()
    if code[:1] in ("}", ")", "]"):
        return True
    keyword = _END_KEYWORD.get(language)
    return bool(keyword and re.match(f"(?:{keyword})\\b", code))


def reopens_block(line: str, language: str) -> bool:
    """Whether `line` closes a block and opens the next one of the same statement: `} else {`,
    `} catch (e) {`, Python's `else:`/`except ...:`, Lua's `else`."""
    code = code_part(line, language).strip()
    if code.startswith("}") and code.endswith("{"):
        return True
    pattern = _REOPENS.get(language)
    return bool(pattern and re.fullmatch(pattern, code))


def only_closers(text: str) -> bool:
    """Whether `text` holds nothing but auto-closed characters (and spaces)."""
    stripped = text.strip()
    return bool(stripped) and all(c in CLOSERS or c in " \t" for c in stripped)


def anchor(typed: str, first: str, prev: str | None, language: str) -> tuple[int, bool]:
    """The indentation (columns) a suggestion's lines are measured against, and whether the
    block they belong to opens there (one level deeper): the cursor's line once the
    suggestion's `first` line continues it, or the line above when that is blank."""
    head = typed + first
    if head.strip():
        return line_width(head), opens_block(head, language)
    if typed:
        return width(typed), False
    return (line_width(prev), opens_block(prev, language)) if prev else (0, False)


def _model_unit(first_width: int, ref: int, style: IndentStyle) -> int | None:
    """Spaces per level the model used, from its first indented line: None when that is one of
    the file's levels (up to one deeper than the anchor at `ref` columns), else the width that
    puts it at one of those levels; None when none does."""
    deepest = ref // style.columns + 1
    if not style.tabs and first_width % style.unit == 0 and first_width <= deepest * style.unit:
        return None
    for unit in (4, 2, 8) if style.tabs else (4, 2):
        if unit != style.unit and first_width % unit == 0 and first_width // unit <= deepest:
            return unit
    return None


def reindent(lines: list[str], typed: str, prev: str | None, language: str,
             style: IndentStyle | None) -> list[str]:
    """`lines` with their indentation in the file's `style` when the model used another (tabs
    for spaces, spaces for tabs, another width). The first line continues the cursor's line and
    is left alone, unless the cursor is at the start of its line (`typed` empty)."""
    start = 1 if typed else 0
    body = [i for i in range(start, len(lines)) if lines[i].strip()]
    if style is None or not body:
        return lines
    leads = [indent_of(lines[i]) for i in body]
    out = list(lines)
    if not style.tabs and any("\t" in lead for lead in leads):
        for i, lead in zip(body, leads):
            out[i] = lead.replace("\t", style.levels(1)) + lines[i][len(lead):]
        return out
    if any("\t" in lead for lead in leads):
        return lines
    ref = anchor(typed, lines[0], prev, language)[0] if typed else anchor("", "", prev, language)[0]
    indented = [width(lead) for lead in leads if lead]
    unit = _model_unit(indented[0], ref, style) if indented else None
    if unit is None:
        if not style.tabs or not any(leads):
            return lines
        unit = 4
    for i, lead in zip(body, leads):
        columns = width(lead)
        out[i] = style.levels(columns // unit) + " " * (columns % unit) + lines[i][len(lead):]
    return out
