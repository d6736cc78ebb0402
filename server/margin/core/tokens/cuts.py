"""Where a text can be cut into pieces whose token counts add up exactly to the count of the
whole, so that code can be sized and trimmed from the counts of its pieces (counted once and
cached) instead of being tokenized whole again.

tiktoken-style tokenizers first split text with a regular expression and then merge bytes only
within each split; a piece boundary that is also a split boundary changes nothing. For the
vetted patterns below, a split boundary always falls at the start of a line that has something
other than whitespace on it: the whitespace run before it ends at its last line break
(`\\s*[\\r\\n]+` comes before `\\s+(?!\\S)`), and nothing else matches across a line break —
except, in o200k and Tekken, punctuation followed by line breaks and slashes
(` ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*`), so a line whose very first character is "/" may join the line
before it and is no cut. A blank line is never a cut either (the whitespace run goes on past it).

Only patterns known here are cut; any other tokenizer's counts are not assumed to add up.
tests/unit/core/tokens/test_cuts.py checks the rule on real code and on random text made of the
characters that could break it (line breaks of every kind, Unicode spaces, slashes, tabs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

O200K_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+",
])
CL100K_PATTERN = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
                  r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s")
TEKKEN_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
    r"\p{N}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+",
])

_AT_LINE_START = re.compile(r"\n(?=[ \t]*\S)")
"""the line break before every line that has something other than whitespace on it (matched, not
looked behind for, which lets the regular expression engine jump from line break to line break)"""
_AT_LINE_START_NO_SLASH = re.compile(r"\n(?=[^\s/]|[ \t]+\S)")
"""the same, except before a line whose first character is "/" """


@dataclass(frozen=True)
class LineCuts:
    """A tokenizer's safe cuts: `pieces(text)` are consecutive parts of `text`, each starting at
    the start of `text` or of a line, whose counts add up to the count of `text`; so does any run
    of consecutive pieces."""

    _at: re.Pattern[str]

    def pieces(self, text: str) -> list[str]:
        parts = self._at.split(text)
        last = parts.pop()
        pieces = [part + "\n" for part in parts]
        if last:
            pieces.append(last)
        return pieces


_KNOWN = {O200K_PATTERN: _AT_LINE_START_NO_SLASH, TEKKEN_PATTERN: _AT_LINE_START_NO_SLASH,
          CL100K_PATTERN: _AT_LINE_START}


def line_cuts_for(split_pattern: str) -> LineCuts | None:
    """The safe cuts of a tokenizer with this split pattern, if it is one vetted here."""
    at = _KNOWN.get(split_pattern)
    return LineCuts(at) if at is not None else None
