"""Virtual files: the editor's open documents keyed by URI, with versions and sha256 fingerprints.

A `VirtualFile` is an immutable snapshot (uri, language id, version, text). Applying an edit
makes a new snapshot, so whoever holds one (a prompt, a proposed edit) keeps exactly the text
it saw. Positions are LSP positions: a zero-based line and a column counted in the negotiated
encoding's units (UTF-16 code units by default, UTF-8 bytes or code points when negotiated).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum


class PositionEncoding(str, Enum):
    UTF8 = "utf-8"
    UTF16 = "utf-16"
    UTF32 = "utf-32"


def choose_position_encoding(offered: Sequence[str] | None) -> PositionEncoding:
    """UTF-8 when the client offers it (Python counts code points, and UTF-8 is what Neovim and
    Helix prefer); otherwise UTF-16, which every client must support."""
    if offered and PositionEncoding.UTF8.value in offered:
        return PositionEncoding.UTF8
    return PositionEncoding.UTF16


def fingerprint(text: str) -> str:
    """`sha256:<hex>` over the exact UTF-8 bytes of `text`."""
    data = text.encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Position:
    line: int
    character: int


@dataclass(frozen=True, slots=True)
class Range:
    start: Position
    end: Position


@dataclass(frozen=True, slots=True)
class TextChange:
    """One content change from the editor: `range=None` replaces the whole text."""

    text: str
    range: Range | None = None


class SyncError(ValueError):
    """An edit cannot be applied to the virtual file (unknown file, bad range, old version)."""


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _units(char: str, encoding: PositionEncoding) -> int:
    code = ord(char)
    if encoding is PositionEncoding.UTF16:
        return 2 if code > 0xFFFF else 1
    if encoding is PositionEncoding.UTF8:
        if code < 0x80:
            return 1
        if code < 0x800:
            return 2
        return 4 if code > 0xFFFF else 3
    return 1


def _count_units(text: str, encoding: PositionEncoding) -> int:
    if encoding is PositionEncoding.UTF32 or text.isascii():
        return len(text)
    if encoding is PositionEncoding.UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


class VirtualFile:
    """One open document at one version. Immutable; fingerprint and line index are computed
    on first use and cached."""

    __slots__ = ("_fingerprint", "_line_starts", "language_id", "text", "uri", "version")

    def __init__(self, uri: str, language_id: str, version: int, text: str) -> None:
        self.uri = uri
        self.language_id = language_id
        self.version = version
        self.text = text
        self._fingerprint: str | None = None
        self._line_starts: list[int] | None = None

    def __repr__(self) -> str:  # metadata only: never the text
        return f"VirtualFile(uri={self.uri!r}, version={self.version}, chars={len(self.text)})"

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.text)
        return self._fingerprint

    @property
    def line_starts(self) -> list[int]:
        """Offsets where each line begins; lines end at \\n, \\r\\n or \\r (as LSP defines)."""
        if self._line_starts is None:
            if "\r" in self.text:
                self._line_starts = [0] + [m.end() for m in _LINE_BREAK.finditer(self.text)]
            else:  # the usual case, several times faster (every keystroke of a completion asks)
                self._line_starts = list(itertools.accumulate(
                    (len(line) + 1 for line in self.text.split("\n")[:-1]), initial=0))
        return self._line_starts

    @property
    def line_count(self) -> int:
        return len(self.line_starts)

    def _line_bounds(self, line: int) -> tuple[int, int]:
        """Start offset and end offset (before the line break) of `line`."""
        starts = self.line_starts
        start = starts[line]
        if line + 1 < len(starts):
            end = starts[line + 1] - 1
            if end > start and self.text[end - 1] == "\r" and self.text[end] == "\n":
                end -= 1
        else:
            end = len(self.text)
        return start, end

    def offset_at(self, position: Position, encoding: PositionEncoding) -> int:
        """Code-point offset of an LSP position. As LSP requires, a column past the end of its
        line means the end of the line, and a line past the end means the end of the text; a
        column inside a character (half a surrogate pair, part of a UTF-8 sequence) rounds
        down to that character's start."""
        if position.line < 0 or position.character < 0:
            raise SyncError(f"negative position {position.line}:{position.character}")
        if position.line >= self.line_count:
            return len(self.text)
        start, end = self._line_bounds(position.line)
        wanted = position.character
        line = self.text[start:end]
        if encoding is PositionEncoding.UTF32 or line.isascii():
            return start + min(wanted, len(line))
        used = 0
        for index, char in enumerate(line):
            used += _units(char, encoding)
            if used > wanted:
                return start + index
        return end

    def position_at(self, offset: int, encoding: PositionEncoding) -> Position:
        """LSP position of a code-point offset (clamped to the text)."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.line_starts, offset) - 1
        start, end = self._line_bounds(line)
        return Position(line, _count_units(self.text[start : min(offset, end)], encoding))

    def with_changes(
        self, version: int, changes: Iterable[TextChange], encoding: PositionEncoding
    ) -> VirtualFile:
        """A new snapshot with the editor's changes applied in order (each change's range
        refers to the text left by the previous one)."""
        current: VirtualFile = self
        for change in changes:
            if change.range is None:
                text = change.text
            else:
                begin = current.offset_at(change.range.start, encoding)
                finish = current.offset_at(change.range.end, encoding)
                if finish < begin:
                    raise SyncError(
                        f"change range ends before it starts in {self.uri} "
                        f"({change.range.start.line}:{change.range.start.character} > "
                        f"{change.range.end.line}:{change.range.end.character})"
                    )
                text = current.text[:begin] + change.text + current.text[finish:]
            current = VirtualFile(self.uri, self.language_id, version, text)
        if current is self:  # an empty change list still moves the version on
            current = VirtualFile(self.uri, self.language_id, version, self.text)
        return current


class VirtualFileStore:
    """Every open document, keyed by URI. Remembers the order in which files were last edited
    (most recent first), which prompt assembly uses to rank files."""

    def __init__(self, encoding: PositionEncoding = PositionEncoding.UTF16) -> None:
        self.encoding = encoding
        self._files: dict[str, VirtualFile] = {}
        self._edited: dict[str, int] = {}
        self._edit_lines: dict[str, int] = {}
        """the line where each file's last ranged change started"""
        self._clock = itertools.count(1)

    def __contains__(self, uri: object) -> bool:
        return uri in self._files

    def __len__(self) -> int:
        return len(self._files)

    def get(self, uri: str) -> VirtualFile | None:
        return self._files.get(uri)

    def files(self) -> list[VirtualFile]:
        return list(self._files.values())

    def open(self, uri: str, language_id: str, version: int, text: str) -> VirtualFile:
        file = VirtualFile(uri, language_id, version, text)
        self._files[uri] = file
        return file

    def change(self, uri: str, version: int, changes: Sequence[TextChange]) -> VirtualFile:
        file = self._files.get(uri)
        if file is None:
            raise SyncError(f"{uri} is not open: the editor must send didOpen before didChange")
        if version < file.version:
            raise SyncError(
                f"{uri}: change for version {version} arrived after version {file.version}"
            )
        updated = file.with_changes(version, changes, self.encoding)
        self._files[uri] = updated
        self._edited[uri] = next(self._clock)
        ranged = [change.range for change in changes if change.range is not None]
        if ranged:
            self._edit_lines[uri] = ranged[-1].start.line
        return updated

    def close(self, uri: str) -> None:
        self._files.pop(uri, None)
        self._edited.pop(uri, None)
        self._edit_lines.pop(uri, None)

    def last_edit_line(self, uri: str) -> int | None:
        """The line where the file was last edited (its last change with a range), if known."""
        return self._edit_lines.get(uri)

    def recently_edited(self) -> list[VirtualFile]:
        """Open files that have been edited, most recently edited first."""
        order = sorted(self._edited, key=self._edited.__getitem__, reverse=True)
        return [self._files[uri] for uri in order]
