"""How a file reaches a model: a one-line header and the file's raw text in a fenced block.

    File httpx/_client.py (python, sha256:1a2b3c4d)
    ```python
    <the file, byte for byte>
    ```

The header names the file as the model must name it back (`file_id`: the path relative to its
workspace folder), its language and a short prefix of its fingerprint (Margin keeps the whole
one). The fence is longer than any run of backticks in the text (CommonMark), so no content can
close the block early. The text comes through byte for byte — CRLF, tabs, emoji; a text that
does not end in a line break gets one before the closing fence and says so in its header
(`no final newline`), so `parse_file_blocks` gives back exactly the file's text.

Costs about 1.01× the raw code's tokens, where seed 000's JSON envelope cost 1.21× (escaped
newlines and quotes, and a 64-hex fingerprint the model never needs): see
benchmarks/bench_file_context.py. Threads stored with that envelope keep working:
`from_envelope` renders a stored envelope in this form.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

FINGERPRINT_SHOWN = len("sha256:") + 8
"""How much of a fingerprint the header shows: enough to tell versions apart in a thread."""
NO_FINAL_NEWLINE = "no final newline"
ENVELOPE_TYPE = "virtual_file_context"
"""The `type` of seed 000's JSON envelope, the form file contexts were stored in before."""

_BACKTICKS = re.compile(r"`+")
_HEADER = re.compile(
    r"^File (?P<file_id>.*) \((?P<language>[^,()\n]*), (?P<fingerprint>sha256:[0-9a-f]{8})"
    rf"(?P<no_final>, {NO_FINAL_NEWLINE})?\)\n(?P<bar>`{{3,}})(?P<info>[^`\n]*)\n",
    re.MULTILINE,
)


def fence_bar(text: str) -> str:
    """A backtick fence longer than any run of backticks in `text` (at least three)."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def fence(text: str, language: str = "") -> str:
    """`text` in a fenced block no content can close (a line break added if it lacks one)."""
    bar = fence_bar(text)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{bar}{info_string(language)}\n{body}{bar}"


def info_string(language: str) -> str:
    """A language id as a fence's info string and a header's language: no backticks, spaces,
    commas or parentheses can come through from an editor's language id."""
    return re.sub(r"[^A-Za-z0-9_+.#-]", "", language)


def _one_line(file_id: str) -> str:
    return file_id.replace("\r", "\\r").replace("\n", "\\n")


def file_header(file_id: str, language: str, *notes: str) -> str:
    """The line that names a file in every prompt: `File <file_id> (<language>, <notes>…)`."""
    return f"File {_one_line(file_id)} ({', '.join([info_string(language) or 'text', *notes])})"


def render_file(file_id: str, language: str, fingerprint: str, text: str) -> str:
    """The file as the model sees it: header, then the raw text in a fence no content can close."""
    no_final = bool(text) and not text.endswith("\n")
    notes = [fingerprint[:FINGERPRINT_SHOWN], *([NO_FINAL_NEWLINE] if no_final else [])]
    bar = fence_bar(text)
    body = text + "\n" if no_final else text
    return f"{file_header(file_id, language, *notes)}\n{bar}{info_string(language)}\n{body}{bar}"


@dataclass(frozen=True)
class FileBlock:
    file_id: str
    language: str
    fingerprint: str
    """the prefix the header shows (`sha256:` and 8 hex digits)"""
    text: str
    """the file's text, exactly"""
    end: int
    """where the block ends in the prompt (just after its closing fence)"""


def parse_file_blocks(prompt: str) -> list[FileBlock]:
    """Every file block in `prompt`, in order, each with the exact text that was rendered."""
    blocks: list[FileBlock] = []
    position = 0
    while (header := _HEADER.search(prompt, position)) is not None:
        bar = header.group("bar")
        close = prompt.find(bar, header.end())
        if close < 0:
            break
        body = prompt[header.end():close]
        if header.group("no_final"):
            body = body[:-1]
        blocks.append(FileBlock(header.group("file_id"), header.group("language"), header.group("fingerprint"),
                                body, close + len(bar)))
        position = close + len(bar)
    return blocks


def from_envelope(content: str) -> str | None:
    """A file context stored as seed 000's JSON envelope, rendered as a file block; None when
    `content` is not such an envelope."""
    if not content.startswith("{"):
        return None
    try:
        envelope = json.loads(content)
    except ValueError:
        return None
    if not isinstance(envelope, dict) or envelope.get("type") != ENVELOPE_TYPE:
        return None
    fields = (envelope.get("file_id"), envelope.get("language"), envelope.get("fingerprint"), envelope.get("content"))
    if not all(isinstance(value, str) for value in fields):
        return None
    return render_file(*fields)  # type: ignore[arg-type]
