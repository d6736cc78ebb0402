"""Project instruction files read for a prompt: from the editor's buffer when the file is open,
else from the workspace folder's files (core.workspace_files), checked for changes on every
request by their stamp (size and modification time) and read again only when it changed.

Only the project's own text: files inside the workspace folder (a path, or a symlink anywhere on
it, that leads outside is skipped), regular files (adapters.workspace_read), none that git
ignores, looked for from the active file's repository root down (never in a folder above it),
and none at all in a folder Margin does not index (the file system's root, the home folder)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from margin.core import instructions as rules
from margin.core.instructions import InstructionFile
from margin.core.tokens.counter import TokenCounter
from margin.core.workspace_files import FolderFiles, Stamp
from margin.services.app import MarginApp

log = logging.getLogger(__name__)

MAX_BYTES = 256 * 1024
"""An instruction file is read up to this size (its cap cuts it far sooner)."""


@dataclass(frozen=True)
class Instructions:
    """What a prompt shows of the instruction files, and what their cap left out."""

    files: tuple[InstructionFile, ...] = ()
    cut: tuple[str, ...] = ()


@dataclass
class InstructionFiles:
    app: MarginApp
    _disk: dict[Path, tuple[Stamp, str | None]] = field(default_factory=dict)
    """path → (stamp, text or None when unreadable): read again when the stamp changes"""

    def find(self, text_document: str | None) -> list[InstructionFile]:
        """The instruction files for a prompt about `text_document`, farthest first."""
        settings = self.app.settings.current.globals
        workspace = self.app.workspace
        root = workspace.root_of(text_document)
        if root is None or not settings.instruction_files:
            return []
        active = workspace.file_id(text_document) if text_document else None
        if active == text_document:  # outside every workspace folder: the workspace folder's own
            active = None
        found, files = [], self.app.workspace_access.files(root)
        if files.why_not_indexed() is not None:  # `/`, the home folder: every project's and secret's
            return []
        folders = rules.folders_between(active)
        # From the repository's root down: never a folder above it (a workspace of many projects).
        top = next((i for i in range(len(folders) - 1, 0, -1)
                    if files.stamp(f"{folders[i]}/.git") is not None), 0)
        for place in rules.candidates(settings.instruction_files, folders[top:]):
            text = self._text(root, files, place.file_id)
            if text is not None and text.strip():
                found.append(InstructionFile(place.file_id, place.distance, place.rank, text=text))
        return found

    async def for_prompt(self, text_document: str | None, counter: TokenCounter) -> Instructions:
        """The instruction files within the `instructionsMaxTokens` cap, counted by `counter`."""
        files = self.find(text_document)
        if not files:
            return Instructions()
        kept, cut = await rules.fit(files, self.app.settings.current.globals.instructions_max_tokens,
                                    counter.count_texts)
        if cut:
            log.info("instructions over their cap files=%d cut=%d", len(files), len(cut))
        return Instructions(tuple(kept), tuple(c.describe() for c in cut))

    def _text(self, root: Path, files: FolderFiles, file_id: str) -> str | None:
        path = root / file_id
        open_file = self.app.files.get(path.as_uri())
        stamp = files.stamp(file_id) if open_file is None else None
        if open_file is None and stamp is None:  # most places have none: a stat tells
            self._disk.pop(path, None)
            return None
        if not files.inside(file_id):
            log.info("instruction file skipped: it leads outside the workspace")
            return None
        if files.git_ignores(file_id):  # `.env`, build output: not the project's own text
            log.info("instruction file skipped: git ignores it")
            return None
        if open_file is not None:
            return open_file.text
        assert stamp is not None
        known = self._disk.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        text = _text_of(files.read(file_id, MAX_BYTES))
        self._disk[path] = (stamp, text)
        return text


def _text_of(data: bytes | None) -> str | None:
    """An instruction file's text from its first MAX_BYTES; None for a folder, an unreadable or
    a binary file."""
    if data is None or b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")
