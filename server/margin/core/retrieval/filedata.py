"""One indexed file in compact form: which lines hold which term, in three flat buffers.

`FileData` keeps the file's distinct terms sorted and joined by spaces in one string (terms are
ASCII identifier parts, never holding a space), per term the number of lines holding it
(`counts`, an `array`) and all those line numbers back to back in term order (`positions`, an
`array`, ascending within each term). Arrays hold 2-byte items when the file has fewer than
65,536 lines, else 4-byte ones. A term's line numbers are found by bisecting the term list and
summing the counts before it, and a window's term frequency is two bisects into them.

`export` / `load` give a JSON-serialisable dict: the term string, and the two arrays as base64
of their little-endian bytes.
"""

from __future__ import annotations

import base64
import sys
from array import array
from bisect import bisect_left
from collections.abc import Mapping
from itertools import accumulate
from types import ModuleType
from typing import Any

from margin.core.retrieval.terms import STOPWORDS, line_terms

_fast: ModuleType | None = None
try:  # the C tokeniser (_fastterms.c), built by the package when a C compiler was there
    from margin.core.retrieval import _fastterms
except ImportError:  # pragma: no cover - a build without a compiler: the Python below, identical
    pass
else:
    _fastterms.set_stopwords(sorted(STOPWORDS))
    _fast = _fastterms

FORMAT = 2
"""`export`'s format version (1 was a hex bit mask of lines per term)."""


class FileData:
    __slots__ = ("counts", "doc", "fingerprint", "lines", "positions", "terms")

    def __init__(self, fingerprint: str, lines: int, terms: str, counts: array[int], positions: array[int]) -> None:
        self.fingerprint = fingerprint
        self.lines = lines
        self.doc = -1
        """The file's number in the index's `Postings`, set when it is stored."""
        self.terms = terms
        self.counts = counts
        self.positions = positions

    def term_list(self) -> list[str]:
        return self.terms.split(" ") if self.terms else []

    def layout(self) -> tuple[list[str], list[int]]:
        """The terms as a list, and where each term's line numbers start in `positions` (one
        more at the end): what `line_numbers` looks terms up in."""
        return self.term_list(), list(accumulate(self.counts, initial=0))

    def line_numbers(self, layout: tuple[list[str], list[int]], term: str) -> array[int] | None:
        """The lines holding `term`, ascending (`layout`: `layout()`), or None."""
        names, offsets = layout
        i = bisect_left(names, term)
        if i == len(names) or names[i] != term:
            return None
        return self.positions[offsets[i]:offsets[i + 1]]

    def export(self) -> dict[str, Any]:
        return {"v": FORMAT, "lines": self.lines, "terms": self.terms, "tf": _encode(self.counts),
                "at": _encode(self.positions)}


def typecode(lines: int) -> str:
    return "H" if lines < 1 << 16 else "I"


def fast_tokeniser() -> bool:
    """Whether `from_text` runs the C tokeniser (else the Python one, about seven times slower)."""
    return _fast is not None


def fast_module() -> ModuleType | None:
    """The C module (its KeyNumbers numbers a build's keys), or None."""
    return _fast


def from_text(text: str, fingerprint: str) -> FileData:
    """Tokenise `text` (lines split on "\\n", terms by `terms.line_terms`): in C when the package
    was built with it, else `python_from_text`; the output is identical."""
    if _fast is None:
        return python_from_text(text, fingerprint)
    lines, terms, counts, positions = _fast.from_text(text)
    code = typecode(lines)
    counts_array, positions_array = array(code), array(code)
    counts_array.frombytes(counts)
    positions_array.frombytes(positions)
    return FileData(fingerprint, lines, terms, counts_array, positions_array)


def python_from_text(text: str, fingerprint: str) -> FileData:
    """`from_text` in Python."""
    lines_of: dict[str, list[int]] = {}
    all_lines = text.split("\n")
    for number, terms in enumerate(line_terms(all_lines)):
        for term in terms:
            found = lines_of.get(term)
            if found is None:
                lines_of[term] = [number]
            elif found[-1] != number:
                found.append(number)
    names = sorted(lines_of)
    code = typecode(len(all_lines))
    positions = array(code)
    for name in names:
        positions.extend(lines_of[name])
    return FileData(fingerprint, len(all_lines), " ".join(names),
                    array(code, [len(lines_of[name]) for name in names]), positions)


def load(data: Mapping[str, Any], fingerprint: str) -> FileData | None:
    """`FileData.export`'s output back, or None if it is another format version or malformed."""
    try:
        if data.get("v") != FORMAT:
            return None
        lines = int(data["lines"])
        terms = data["terms"]
        code = typecode(lines)
        counts, positions = _decode(code, data["tf"]), _decode(code, data["at"])
        if not isinstance(terms, str) or len(counts) != (terms.count(" ") + 1 if terms else 0) \
                or sum(counts) != len(positions):
            return None
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return FileData(fingerprint, lines, terms, counts, positions)


def _encode(values: array[int]) -> str:
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _decode(code: str, text: str) -> array[int]:
    values = array(code)
    values.frombytes(base64.b64decode(text, validate=True))
    if sys.byteorder != "little":
        values.byteswap()
    return values
