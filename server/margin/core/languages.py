"""The language id of a file Margin reads from disk rather than from an editor (which sends its
own): one map from a file name's extension to the id VS Code would give it, used by the
terminal commands to open files and by retrieval to fence its snippets."""

from __future__ import annotations

import os

LANGUAGES = {".py": "python", ".pyi": "python", ".ts": "typescript", ".tsx": "typescriptreact",
             ".js": "javascript", ".jsx": "javascriptreact", ".mjs": "javascript", ".rs": "rust", ".go": "go",
             ".java": "java", ".c": "c", ".h": "c", ".cpp": "cpp", ".hpp": "cpp", ".cs": "csharp",
             ".rb": "ruby", ".php": "php", ".lua": "lua", ".sh": "shellscript", ".md": "markdown",
             ".toml": "toml", ".json": "json", ".yml": "yaml", ".yaml": "yaml", ".html": "html", ".css": "css"}
"""extension (lower case, with its dot) -> language id"""


def language_of(path: str, unknown: str) -> str:
    """The language id of the file at `path` (its extension, in any case), else `unknown`."""
    return LANGUAGES.get(os.path.splitext(path)[1].lower(), unknown)
