"""Project instructions ("core memories"): the rule files a workspace keeps for its assistants,
found, ordered and fitted to their cap.

Where they are looked for (the `instructionFiles` setting, in this order by default):

    AGENTS.md, .margin/instructions.md, CLAUDE.md, .github/copilot-instructions.md

A name without a slash is looked for in every folder from the workspace folder down to the
active file's folder (`AGENTS.md`, `src/AGENTS.md`, `src/http/AGENTS.md`); a path with a slash
only under the workspace folder. The prompt shows them farthest first, so the rules nearest the
active file come last and read as the most specific.

They are required: never dropped to make room for anything else, never folded into a summary
(they are not history). Their own cap (`instructionsMaxTokens`, default 2,000) bounds them:
over it, the files farthest from the active file are cut first (among files of one folder, the
later names of the setting first), and the nearest file that straddles the cap keeps its first
lines that fit. Each cut is named in the budget report.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from margin.core.budget import Item, Section

HEADING = ("Project instructions, from the instruction files of the user's workspace (each "
           "under a line `Instructions from <path>`). Follow them unless the user says otherwise.")
MIN_PART_TOKENS = 32
"""A straddling file keeps its first lines only if at least this many tokens of the cap are left."""


@dataclass(frozen=True)
class Candidate:
    """A place an instruction file may be: its path relative to the workspace folder."""

    file_id: str
    distance: int = 0
    """folders between the file's folder and the active file's (0: the same folder)"""
    rank: int = 0
    """its name's place in the setting (0: first)"""


@dataclass(frozen=True, kw_only=True)
class InstructionFile(Candidate):
    """An instruction file found at its candidate place, and its text."""

    text: str


@dataclass(frozen=True)
class Cut:
    """An instruction file, or its end, left out over the cap."""

    file_id: str
    lines: tuple[int, int] | None = None
    """the 1-based first and last line cut, when only the file's end was cut"""

    def describe(self) -> str:
        return f"{self.file_id} lines {self.lines[0]}-{self.lines[1]}" if self.lines else self.file_id


def candidates(names: Sequence[str], folders: Sequence[str]) -> list[Candidate]:
    """Where to look, farthest first. `folders` are the folders from the workspace folder ('')
    down to the active file's (`src`, `src/http`); names with a slash are looked for under the
    workspace folder only."""
    folders = list(folders) or [""]
    deepest = len(folders) - 1
    found: list[Candidate] = []
    for depth, folder in enumerate(folders):
        for rank, name in enumerate(names):
            name = name.strip().strip("/")
            if not name or ("/" in name and depth > 0):
                continue
            file_id = f"{folder}/{name}" if folder else name
            found.append(Candidate(file_id, deepest - depth, rank))
    return found


def folders_between(active_file_id: str | None) -> list[str]:
    """The folders from the workspace folder down to the one holding `active_file_id` (a path
    relative to the workspace folder): `src/http/x.py` → ['', 'src', 'src/http']."""
    parts = (active_file_id or "").split("/")[:-1]
    return [""] + ["/".join(parts[: i + 1]) for i in range(len(parts)) if parts[i] not in ("", ".", "..")]


def section_text(file: InstructionFile) -> str:
    """One file as the prompt shows it."""
    return f"Instructions from {file.file_id}:\n{file.text.strip()}"


def render(files: Sequence[InstructionFile]) -> str:
    """The instructions part of the system prompt ('' when there are none)."""
    if not files:
        return ""
    return "\n\n".join([HEADING, *(section_text(f) for f in files)])


def section(files: Sequence[InstructionFile], cut: Sequence[str], count: Callable[[str], int]) -> Section:
    """The prompt's `instructions` budget section: required, one item per file as rendered (the
    first carries the heading), and what the cap cut reported as dropped."""
    heading = count(HEADING) + 2 if files else 0
    items = tuple(Item(file.file_id, count(section_text(file)) + 2 + (heading if i == 0 else 0), file)
                  for i, file in enumerate(files))
    return Section("instructions", items, required=True, cut_before=tuple(Item(c, 0) for c in cut),
                   drop_reason="over the instructions cap; the files farthest from the active file are cut first")


def texts_to_count(files: Sequence[InstructionFile]) -> list[str]:
    return [HEADING, *map(section_text, files)]


async def fit(files: Sequence[InstructionFile], cap: int,
              count: Callable[[list[str]], Awaitable[list[int]]]) -> tuple[list[InstructionFile], list[Cut]]:
    """What of `files` (farthest first) fits `cap` tokens, counted as rendered, and what was cut
    (farthest first): the nearest files are kept first, and the one that straddles the cap keeps
    its first lines that fit. `count` counts texts exactly (the profile's tokenizer)."""
    if not files:
        return [], []
    heading, *sizes = await count([HEADING, *(section_text(f) for f in files)])
    order = sorted(range(len(files)), key=lambda i: (files[i].distance, files[i].rank))  # nearest first
    left = cap - heading - 2
    kept: dict[int, InstructionFile] = {}
    cuts: list[Cut] = []
    for i in order:
        file, need = files[i], sizes[i] + 2
        if need <= left:
            kept[i] = file
            left -= need
            continue
        part = await _head(file, left, count) if left >= MIN_PART_TOKENS else None
        if part is None:
            cuts.append(Cut(file.file_id))
        else:
            kept[i], first_cut = part
            cuts.append(Cut(file.file_id, (first_cut, len(file.text.strip().splitlines()))))
        left = 0  # everything farther is cut
    return [kept[i] for i in sorted(kept)], cuts[::-1]


async def _head(file: InstructionFile, room: int,
                count: Callable[[list[str]], Awaitable[list[int]]]) -> tuple[InstructionFile, int] | None:
    """The file's first lines whose section fits `room` tokens, and the 1-based line where the
    cut starts; None if not even its first line fits."""
    lines = file.text.strip().splitlines()

    def head(n: int) -> InstructionFile:
        return replace(file, text="\n".join(lines[:n]))

    low, high = 0, len(lines) - 1  # the most lines that fit, found by bisection
    while low < high:
        middle = (low + high + 1) // 2
        if (await count([section_text(head(middle))]))[0] + 2 <= room:
            low = middle
        else:
            high = middle - 1
    return (head(low), low + 1) if low else None
