"""The agent's reading tools against the workspace: `read`, `list` and `search`
(core/agent/tools.py).

They show only the workspace's own text, by the rule every workspace read follows
(docs/security.md): a path names a file inside a workspace folder once its symlinks are resolved,
never a file git ignores (`.env`), nor anything in a folder Margin does not index (`/`, the home
folder), and it is read as a regular file of bounded size. An open document is read as the
editor holds it (unsaved text included), so that what the model reads is what an edit will
replace. Each result says what it is, and what was cut to fit."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from margin.core.agent.edits import fingerprint
from margin.core.workspace_files import MAX_FILE_BYTES, FolderFiles
from margin.services.app import MarginApp

if TYPE_CHECKING:
    from margin.services.agent_turn import ClientFiles
    from margin.services.retrieval import Retrieval

LIST_LIMIT = 200
MISSING_NAMES = 20
"""a missing file's answer names at most this many of what the nearest folder holds"""
"""entries a listing shows at most"""
SEARCH_HITS = 20
"""exact-text hits, and retrieval's windows, a search shows at most"""
SEARCH_FILES = 5000
SEARCH_BYTES = 32 << 20
"""an exact-text search reads at most these many files and bytes of the folder, and says so"""


@dataclass(frozen=True)
class Shown:
    """A tool's result: what the model is shown, and for the edit ledger what it was shown of."""

    text: str
    ok: bool = True
    path: str | None = None
    current: str | None = None
    """the file's whole text as it is now (read only)"""
    start: int = 1
    end: int | None = None
    """the lines shown (read only)"""


class WorkspaceReads:
    def __init__(self, app: MarginApp, folder_uri: str) -> None:
        self.app = app
        self.folder_uri = folder_uri.rstrip("/")
        """the workspace folder the agent works in: paths are relative to it"""
        self.client: dict[str, str | None] = {}
        """the files as the client holds them (ACP's fs/*), by file id, as last fetched; None:
        the client has no such file"""

    def _files(self) -> FolderFiles | str:
        root = self.app.workspace.root_of(self.folder_uri)
        if root is None:
            return "The workspace folder is not on this machine's disk."
        files = self.app.workspace_access.files(root)
        why = files.why_not_indexed()
        return f"This workspace folder is not read by Margin: {why}." if why else files

    def file_id(self, path: str) -> str | None:
        """The path as a file id inside the folder (`./a/b.py` → `a/b.py`), or None when it
        leaves it by its spelling (absolute, `..`)."""
        pure = PurePosixPath(path.strip().replace("\\", "/"))
        if pure.is_absolute() or ".." in pure.parts:
            return None
        parts = [part for part in pure.parts if part != "."]
        return "/".join(parts)

    def _readable(self, path: str) -> tuple[FolderFiles, str] | str:
        """The folder's files and the path's file id, when the rule lets it be read; else why not."""
        files = self._files()
        if isinstance(files, str):
            return files
        file_id = self.file_id(path)
        if file_id is None or not file_id or not files.inside(file_id):
            return f"{path} is not a file inside the workspace."
        if files.git_ignores(file_id):
            return f"{path} is ignored by git: not the project's own text, so it is not read."
        return files, file_id

    async def fetch(self, path: str, client: ClientFiles) -> str | None:
        """Ask the client for the file's text now (the same rule first: the client is never asked
        for a file Margin would not read); None when done, else why not."""
        from margin.services.agent_turn import ClientFileError

        readable = self._readable(path)
        root = self.app.workspace.root_of(self.folder_uri)
        if isinstance(readable, str) or root is None:
            return readable if isinstance(readable, str) else "The workspace folder is not on this machine's disk."
        file_id = readable[1]
        try:
            text = await client.read(root / file_id)
        except ClientFileError as error:
            return f"{path} cannot be read: {error}"
        if text is not None and len(text.encode("utf-8", errors="replace")) > MAX_FILE_BYTES:
            return f"{path} is over {MAX_FILE_BYTES // 1024} KB: too large to read."
        self.client[file_id] = text
        return None

    def current_text(self, path: str) -> tuple[str | None, str | None]:
        """The file's text now — the client's when it holds the files, the editor's when it is
        open — or None, and why not."""
        readable = self._readable(path)
        if isinstance(readable, str):
            return None, readable
        files, file_id = readable
        if file_id in self.client:
            held = self.client[file_id]
            return (held, None) if held is not None else (None, f"There is no file {path}.")
        opened = self.app.files.get(f"{self.folder_uri}/{file_id}")
        if opened is not None:
            return opened.text, None
        data = files.read(file_id, MAX_FILE_BYTES + 1)
        if data is None:
            return None, f"There is no file {path}." if files.stamp(file_id) is None else f"{path} cannot be read."
        if len(data) > MAX_FILE_BYTES:
            return None, f"{path} is over {MAX_FILE_BYTES // 1024} KB: too large to read."
        if b"\0" in data:
            return None, f"{path} is a binary file."
        return data.decode("utf-8", errors="replace"), None

    def read(self, path: str, start: int | None = None, end: int | None = None, max_chars: int = 24_000,
             numbered: bool = False) -> Shown:
        """Lines `start`..`end` of a file (all: None), as many whole lines as fit `max_chars`;
        `numbered`: each line after its number (`  12| `), for a model that edits lines by number."""
        text, problem = self.current_text(path)
        if text is None:
            if problem is None or problem == f"There is no file {path}.":
                problem = self.missing(path)
            return Shown(problem, ok=False, path=path)
        path = self.file_id(path) or path  # as the ledger and every later result name it
        if not text:
            return Shown(f"{path} is empty (sha256:{fingerprint(text)[:12]}).\n", path=path, current=text)
        lines = text.splitlines(keepends=True)
        total = len(lines)
        first = max(1, start or 1)
        last = min(end or total, total)
        if total and (first > total or last < first):
            return Shown(f"{path} has {total} lines: lines {first}-{end or total} are not in it.", ok=False, path=path)
        shown: list[str] = []
        used = 0
        for line in lines[first - 1:last]:
            if used + len(line) > max_chars and shown:
                break
            shown.append(line)
            used += len(line)
        through = first + len(shown) - 1
        head = f"{path} lines {first}-{through} of {total} (sha256:{fingerprint(text)[:12]})"
        if through < last:
            head += f"; lines {through + 1}-{last} did not fit: read them next"
        if numbered:
            shown = [f"{number:>4}| {line}" for number, line in enumerate(shown, first)]
        body = "".join(shown)
        return Shown(f"{head}\n{body}" + ("" if body.endswith("\n") or not body else "\n"), path=path,
                     current=text, start=first, end=max(first, through))

    def missing(self, path: str) -> str:
        """That there is no file `path`, with what the nearest folder that exists holds: a model
        that guessed a name (`main.py`) sees the real ones instead of guessing again."""
        said = f"There is no file {path}."
        files, file_id = self._files(), self.file_id(path)
        if isinstance(files, str) or not file_id:
            return said
        folder = PurePosixPath(file_id).parent
        while (found := files.listing("" if folder.name == "" else str(folder))) is None:
            if folder.name == "":
                return said
            folder = folder.parent
        names = [name + ("/" if is_dir else "") for name, is_dir in found]
        if not names:
            return f"{said} {folder}/ is empty."
        more = len(names) - MISSING_NAMES
        return f"{said} {folder}/ holds: {', '.join(names[:MISSING_NAMES])}" + (f" (and {more} more)." if more > 0 else ".")

    def list(self, path: str = ".") -> Shown:
        """A folder's files and folders (folders end with `/`), as git would show them."""
        files = self._files()
        if isinstance(files, str):
            return Shown(files, ok=False, path=path)
        folder_id = self.file_id(path)
        found = files.listing(folder_id) if folder_id is not None else None
        if found is None:
            return Shown(f"{path} is not a folder inside the workspace (or git ignores it).", ok=False, path=path)
        names = [name + ("/" if is_dir else "") for name, is_dir in found]
        more = len(names) - LIST_LIMIT
        listed = "\n".join(names[:LIST_LIMIT]) + (f"\n… and {more} more" if more > 0 else "")
        return Shown(f"{folder_id or '.'}/ holds {len(names)}:\n{listed}\n" if names else f"{folder_id or '.'}/ is empty.\n",
                     path=path)

    async def search(self, query: str, retrieval: Retrieval | None = None) -> Shown:
        """Where `query` occurs as exact text (open documents as the editor holds them), then the
        windows retrieval ranks as related to its words."""
        if not query.strip():
            return Shown("Give words, a name or exact text to search for.", ok=False)
        files = self._files()
        if isinstance(files, str):
            return Shown(files, ok=False)
        opened = {f.uri[len(self.folder_uri) + 1:]: f.text for f in self.app.files.files()
                  if f.uri.startswith(self.folder_uri + "/")}
        opened.update({file_id: text for file_id, text in self.client.items() if text is not None})
        exact, note = await asyncio.to_thread(_exact, files, query, opened)
        ranked = await retrieval.snippets(query, self.folder_uri + "/", ()) if retrieval is not None else []
        lines = [f"Exact text {query!r}: " + (f"{len(exact)} places" if exact else "nowhere") + note]
        lines += exact[:SEARCH_HITS]
        related = [f"{ref.file_id}: {_first_line(ref.file.text)}" for ref in ranked[:SEARCH_HITS]]
        if related:
            lines += ["Related by its words:", *related]
        return Shown("\n".join(lines) + "\n")


def _exact(files: FolderFiles, query: str, opened: dict[str, str]) -> tuple[list[str], str]:
    """`path:line: text` of each line holding `query`, and a note when not every file was read."""
    hits: list[str] = []
    read_files = read_bytes = 0
    note = ""
    for found in files.scan():
        if read_files >= SEARCH_FILES or read_bytes >= SEARCH_BYTES:
            note = f" (searched the first {read_files} files only)"
            break
        text = opened.get(found.file_id)
        if text is None:
            data = files.read(found.file_id, MAX_FILE_BYTES)
            if data is None or b"\0" in data:
                continue
            read_bytes += len(data)
            text = data.decode("utf-8", errors="replace")
        read_files += 1
        if query in text:
            for number, line in enumerate(text.splitlines(), 1):
                if query in line:
                    hits.append(f"{found.file_id}:{number}: {line.strip()[:160]}")
    return hits, note


def _first_line(text: str) -> str:
    return next((line.strip()[:160] for line in text.splitlines() if line.strip()), "")
