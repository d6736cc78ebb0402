"""Post-processing of inline completion: what a model returns for a fill-in-the-middle request
becomes the suggestion shown at the cursor, or nothing.

In order: the family's special tokens, `<think>` blocks and Markdown fences go; an answer that
repeats Margin's own instructions, or a definition written for the top level inside a body, is
no suggestion, and one is cut where it starts copying the file (core/completion/junk.py); a
repeat of what is already typed goes; one line only when the cursor is mid-line; continuation lines take the
file's indentation; the suggestion stops at the end of the block (where the file goes on at the
top level or ends, at the end of the definition: the rest of a function being written), before a
line the file already has next, and after `MAX_LINES`; its tail that the text after the cursor already holds goes;
auto-closed characters after the cursor that the suggestion also closes are replaced, not
doubled. Nothing useful left (empty, whitespace, or only what is already there): None, and
`judge` says why (a `junk.Silence`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from margin.core.completion import code_shape as shape
from margin.core.completion import junk
from margin.core.completion.code_shape import line_width, only_closers, width
from margin.core.completion.markup import cut_at_tokens, strip_leading_tokens, strip_thinking, tokens_of
from margin.core.llm import joined

MAX_LINES = 16
"""A multi-line suggestion stops after this many lines."""
MAX_ECHO_LINES = 40
"""How many lines before the cursor a model's repeat of them is recognised for."""
MIN_ECHO_CHARS = 6
"""A repeat of the lines above the cursor is dropped only when it is this long (stripped), so a
repeated `}` or `end` is kept."""
CONTEXT_LINES = 400
"""Lines of the prefix read to detect open fences."""
INDENT_LINES = 150
"""Lines of the prefix read to detect the file's indentation (enough, and read per request)."""

_FENCE = re.compile(r"^[ \t]*```", re.MULTILINE)
_STATEMENT = re.compile(
    r"[ \t]*(?:(?:async )?def|class|import|from|fn|pub|func|function|export|const|let|var|type|struct|"
    r"impl|static|int|void|local|package|interface|enum|#include|#define)\b|@|\}")
FIT_LINES = 8
"""Lines after the cursor's that the suggestion's brackets are checked against."""
SCAN_LINES = 120
"""Lines before the cursor scanned for what is open at it, from the last of the least indented
that start a definition or statement (outside any string)."""


@dataclass(frozen=True)
class CompletionContext:
    prefix: str
    """the document's text before the cursor (what the model was shown may be shorter)"""
    suffix: str
    """the document's text after the cursor"""
    language: str
    """LSP language id: "python", "typescript", "rust", "go", "c", ..."""
    fim_tokens: tuple[str, ...] = ()
    """special tokens of the model family that must never reach the user"""
    instructions: str = ""
    """Margin's own instructions in the prompt (the chat route's): an answer repeating them is junk"""


@dataclass(frozen=True)
class Suggestion:
    text: str
    """what to insert at the cursor"""
    replaces: int
    """how many characters right after the cursor (on its line) the suggestion replaces: the
    auto-closed characters it already contains"""


@dataclass(frozen=True)
class _Cursor:
    """What the rules need to know about where the cursor is (line breaks normalised)."""
    language: str
    suffix: str
    typed: str          # the cursor's line up to the cursor
    rest: str           # the cursor's line after the cursor
    above: list[str]    # whole lines before the cursor's line, the last MAX_ECHO_LINES
    next_line: str | None  # the first non-blank line after the cursor's line
    style: shape.IndentStyle | None
    in_fence: bool      # inside a Markdown fence of the document (a docstring's example)
    state: tuple[str, ...]  # brackets, strings, a comment open where the cursor's line starts

    @property
    def auto_closed(self) -> bool:
        """The cursor's line goes on with closing characters only, right after the cursor."""
        return self.rest[:1] in shape.CLOSERS and only_closers(self.rest)

    @property
    def midline(self) -> bool:
        return bool(self.rest.strip()) and not self.auto_closed

    @property
    def prev_line(self) -> str | None:
        return next((line for line in reversed(self.above) if line.strip()), None)


def clean(raw: str, context: CompletionContext) -> Suggestion | None:
    """The suggestion to show, or None when nothing useful is left (empty or whitespace-only)."""
    made = judge(raw, context)
    return made if isinstance(made, Suggestion) else None


def judge(raw: str, context: CompletionContext) -> Suggestion | junk.Silence:
    """The suggestion to show, or why nothing is (core/completion/junk.py)."""
    crlf = "\r\n" in context.prefix[-2000:] or "\r\n" in context.suffix[:2000]
    cursor = _cursor(context)
    tokens = tokens_of(context.fim_tokens)
    # A lone surrogate (half of a JSON escape pair) as U+FFFD: the editor is sent valid Unicode.
    raw = joined([raw]).replace("\r\n", "\n")
    text = _strip_markup(raw, tokens, cursor)
    if junk.echoes_instructions(text, context.instructions, raw):
        return junk.Silence("instructions")
    if not text or not text.strip():
        return junk.Silence("empty")
    lines = _drop_echo(text.split("\n"), cursor)
    if lines[0].lstrip().startswith("```"):  # the typed text again, then a fence: the code is inside
        lines = _strip_fences("\n".join(lines), cursor).split("\n")
    if cursor.language == "python" and junk.misplaced(lines, cursor.typed):
        return junk.Silence("misplaced")
    lines = junk.before_file_copy(lines, cursor.typed, context.prefix, context.suffix)
    if not any(line.strip() for line in lines):
        return junk.Silence("file copy")
    lines = _fix_first_line(lines, cursor)
    if cursor.midline:
        lines = lines[:1]
    lines = shape.reindent(lines, cursor.typed, cursor.prev_line, cursor.language, cursor.style)
    lines = _limit_scope(lines, cursor)
    text = _trim_end("\n".join(lines), cursor)
    text, replaces = _fit(cut_at_tokens(text, tokens), cursor)
    if not text.strip() or text == cursor.rest[:replaces]:
        return junk.Silence("nothing new")
    return Suggestion(text.replace("\n", "\r\n") if crlf else text, replaces)


def _cursor(context: CompletionContext) -> _Cursor:
    prefix = context.prefix[-200_000:].replace("\r\n", "\n")
    suffix = context.suffix.replace("\r\n", "\n")
    before = prefix.split("\n")[-CONTEXT_LINES:]
    after = suffix.split("\n", 64)
    next_line = next((line for line in after[1:64] if line.strip()), None)
    style = shape.detect_indent_cached("\n".join(before[-INDENT_LINES:-1])) or shape.detect_indent("\n".join([before[-1], *after[:64]]))
    fences = len(_FENCE.findall("\n".join(before[:-1])))
    state: tuple[str, ...] = ()
    if after[0].strip():
        window = range(max(len(before) - SCAN_LINES, 0), len(before) - 1)
        starts = [i for i in window if _STATEMENT.match(before[i])]  # outside any string
        start = min(reversed(starts), key=lambda i: line_width(before[i]), default=window.start)
        state = shape.state_at("\n".join(before[start:-1]) + "\n", context.language)
    return _Cursor(context.language, suffix, before[-1], after[0], before[:-1][-MAX_ECHO_LINES:],
                   next_line, style, fences % 2 == 1, state)


# --- special tokens, <think>, fences ---------------------------------------------------------

def _strip_fences(text: str, cursor: _Cursor) -> str:
    """The code inside a Markdown fence an instruct model wrapped it in (a sentence ending in
    `:` before the fence goes too, at the start of a line); the text up to a closing fence.
    Left alone in Markdown and at, before or inside a fence of the document itself."""
    document_fence = (cursor.rest + (cursor.next_line or "")).lstrip().startswith("```")
    if cursor.language == "markdown" or cursor.in_fence or document_fence:
        return text
    lines = text.split("\n")
    nonblank = [i for i, line in enumerate(lines) if line.strip()][:3]
    prose_allowed = not cursor.typed.strip()  # else the first line continues the cursor's
    for n, i in enumerate(nonblank):
        if lines[i].lstrip().startswith("```") and (n == 0 or prose_allowed) and all(
                lines[j].rstrip().endswith(":") and " " in lines[j].strip() for j in nonblank[:n]):
            lines = lines[i + 1:]
            break
    closing = next((i for i, line in enumerate(lines) if line.lstrip().startswith("```")), None)
    return "\n".join(lines if closing is None else lines[:closing])


def _strip_markup(raw: str, tokens: list[str], cursor: _Cursor) -> str:
    text = strip_leading_tokens(raw, tokens)
    text = strip_thinking(text)
    text = cut_at_tokens(strip_leading_tokens(text, tokens), tokens)
    return _strip_fences(text, cursor)


# --- what is already typed -----------------------------------------------------------------

def _echo_length(lines: list[str], above: list[str]) -> int:
    """How many of `lines`' first lines repeat the last lines of `above` (compared stripped),
    the longest worth dropping; 0 when none."""
    for j in range(min(len(lines), len(above)), 0, -1):
        if [line.strip() for line in lines[:j]] != [line.strip() for line in above[-j:]]:
            continue
        echoed = "".join(line.strip() for line in lines[:j])
        if len(echoed) >= MIN_ECHO_CHARS and not only_closers(echoed):
            return j
    return 0


def _drop_echo(lines: list[str], cursor: _Cursor) -> list[str]:
    """Without a repeat of the lines above the cursor and of the cursor's line so far."""
    typed = cursor.typed.lstrip()
    if not typed.strip():
        return lines[_echo_length(lines, cursor.above):] or [""]
    rest = cursor.rest.strip()
    for j in range(min(len(lines) - 1, len(cursor.above)), -1, -1):
        if j and [line.strip() for line in lines[:j]] != [l.strip() for l in cursor.above[-j:]]:
            continue
        if lines[j].lstrip().startswith(typed) and not (rest and lines[j].startswith(rest)):
            return [lines[j].lstrip()[len(typed):], *lines[j + 1:]]
    if not lines[0].strip() and not cursor.rest.strip() and len(lines) > 1:
        # a new line after a finished one: the finished one may be repeated first
        n = _echo_length(lines[1:], [*cursor.above, cursor.typed])
        return [lines[0], *lines[1 + n:]]
    return lines


def _drop_columns(lead: str, columns: int) -> str:
    while lead and columns > 0:
        columns -= width(lead[0])
        lead = lead[1:]
    return lead


def _fix_first_line(lines: list[str], cursor: _Cursor) -> list[str]:
    """The first line without whitespace already typed: the space the cursor follows, or the
    indentation of a whitespace-only cursor line that the model wrote again (it writes whole
    lines: its first line's indentation counts from the start of the line, unless the line
    above opens a block the cursor is not indented into yet)."""
    first, typed = lines[0], cursor.typed
    lead = shape.indent_of(first)
    if not first.strip() or not lead or not typed or cursor.midline:
        return lines  # mid-line, leading whitespace may belong with the text after the cursor
    if typed.strip():
        return [first.lstrip(" \t") if typed[-1] in " \t" else first, *lines[1:]]
    if cursor.rest.strip():
        return lines  # its indentation may lead up to the code after the cursor
    prev = cursor.prev_line or ""
    if shape.opens_block(prev, cursor.language) and width(typed) <= line_width(prev):
        return lines  # the block's level is not typed yet: the model's indentation adds it
    if width(lead) >= width(typed):  # the model wrote the whole line, indentation included
        return [_drop_columns(lead, width(typed)) + first.lstrip(" \t"), *lines[1:]]
    return lines


# --- the end of the suggestion ---------------------------------------------------------------

def _closing_allowed(line: str, next_line: str | None) -> bool:
    """A line closing the block is kept unless the file's next line closes it already."""
    if next_line is None:
        return True
    mine, theirs = line.rstrip(), next_line.rstrip()
    return line_width(next_line) <= line_width(line) and not (
        mine.startswith(theirs) or theirs.startswith(mine))


def _limit_scope(lines: list[str], cursor: _Cursor) -> list[str]:
    """The lines up to the end of the block the cursor is in (or opens), before a line the file
    already has next, at most MAX_LINES."""
    language, next_line = cursor.language, cursor.next_line
    head = cursor.typed + lines[0]
    if (next_line is not None and not cursor.typed.strip() and not cursor.rest.strip()
            and head.strip() and head.rstrip() == next_line.rstrip()):
        return [""]
    ref, opened = shape.anchor(cursor.typed, lines[0], cursor.prev_line, language)
    limit = ref + 1 if opened else ref
    brackets = shape.Brackets(language)
    brackets.feed(head + "\n")
    opened_here = brackets.depth > 0
    kept, saw_blank, last = [lines[0]], False, (line_width(head) if head.strip() else ref)
    # Where the file goes on at the top level (or ends), the rest of the definition the cursor is
    # in is code the file lacks: a statement below the cursor's block (still inside the
    # definition, not another definition) is kept.
    open_end = next_line is None or line_width(next_line) == 0
    for line in lines[1:]:
        if len(kept) >= MAX_LINES:
            break
        if not line.strip():
            kept.append(line)
            saw_blank = True
            continue
        columns = line_width(line)
        if next_line is not None and line.rstrip() == next_line.rstrip():
            break
        rest_of_definition = open_end and columns > 0 and not _STATEMENT.match(line)
        if saw_blank and columns < last and not rest_of_definition:
            break
        if columns < limit and not rest_of_definition \
                and not (opened and columns >= ref and shape.reopens_block(line, language)):
            if shape.closes_block(line, language) and _closing_allowed(line, next_line):
                kept.append(line)
            break
        kept.append(line)
        brackets.feed(line + "\n")
        if opened_here and brackets.depth <= 0:
            break
        saw_blank, last = False, columns
    return kept


def _trim_end(text: str, cursor: _Cursor) -> str:
    """Without trailing whitespace, unless it separates the suggestion from a word after the
    cursor."""
    rest = cursor.rest
    if cursor.midline and (rest[:1].isalnum() or rest[:1] == "_"):
        return text.rstrip("\n")
    return text.rstrip()


def _overlaps(text: str, suffix: str) -> Iterator[int]:
    """Lengths of the tails of `text` the suffix starts with, longest first."""
    for k in range(min(len(text), len(suffix)), 0, -1):
        if text[-k:].strip() and suffix.startswith(text[-k:]):
            yield k


def _fit(text: str, cursor: _Cursor) -> tuple[str, int]:
    """The text and how much after the cursor it replaces: the auto-closed characters it ends
    with are replaced; its tail is cut when the text after the cursor starts with it (the
    longest such tail), unless the tail is only punctuation on the cursor's line and the
    brackets and quotes around come out worse without it (`f(x)` typed in `g(|)`)."""
    def line(candidate: str, replaces: int) -> str:
        return candidate + cursor.rest[replaces:]

    kept = (text, _replaces(text, cursor))
    for k in _overlaps(text, cursor.suffix):
        option = (text[:-k], _replaces(text[:-k], cursor))
        if "\n" in text[-k:] or re.search(r"\w", text[-k:]):
            return option  # the model wrote the code after the cursor again
        if line(*option) == line(*kept) or _misfit(*option, cursor) > _misfit(*kept, cursor):
            return kept  # closers of its own (`f(x)` typed in `g(|)`)
        return option
    return kept


def _misfit(text: str, replaces: int, cursor: _Cursor) -> int:
    """How badly the suggestion fits the code around it (the next few lines included)."""
    rest, _, after = cursor.suffix.partition("\n")
    after = "\n".join(after.split("\n", FIT_LINES)[:FIT_LINES])
    typed, state, language = cursor.typed, cursor.state, cursor.language  # typed: quotes pair
    readings = [state, state[:-1]] if state and state[-1] not in "([{" else [state]
    return sum(shape.misfit(s, typed + text + rest[replaces:], typed + rest, after, language)
               for s in readings)  # in a docstring or comment, its text may be code too


def _replaces(text: str, cursor: _Cursor) -> int:
    """How many auto-closed characters after the cursor the suggestion ends with itself: of
    those it ends with, as many as leave the line's brackets and quotes best (the most, when
    it makes no difference)."""
    if not cursor.auto_closed:
        return 0
    rest, squeezed = cursor.rest.rstrip(), re.sub(r"\s+", "", text)
    cuts = [k for k in range(len(rest), 0, -1) if rest[k - 1] not in " \t"]
    ends = [k for k in cuts if squeezed.endswith(re.sub(r"\s+", "", rest[:k]))]
    # It may also close them earlier and go on (`a) + 1` typed in `f(|)`): replaced when the
    # line fits better so. On a tie: what it ends with, else nothing.
    inside = [k for k in cuts if k not in ends and all(text.count(c) >= rest[:k].count(c) for c in set(rest[:k]))]
    return min([*ends, 0, *inside], key=lambda k: _misfit(text, k, cursor))
