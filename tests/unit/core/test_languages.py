"""One map from a file's extension to its language id, for files Margin reads from disk."""

from __future__ import annotations

from pathlib import Path

import margin
from margin.core.languages import language_of


def test_a_file_gets_the_id_vs_code_gives_its_extension_in_any_case():
    assert language_of("src/app.py", "plaintext") == "python"
    assert language_of("/w/View.TSX", "plaintext") == "typescriptreact"
    assert language_of("run.sh", "text") == "shellscript"


def test_an_unknown_or_missing_extension_gets_the_callers_default():
    assert language_of("notes.txt", "plaintext") == "plaintext"
    assert language_of("Makefile", "text") == "text"
    assert language_of("archive.tar.gz", "text") == "text"


def test_the_map_is_written_once():
    package = Path(margin.__file__).parent
    holders = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                     if '".pyi": "python"' in path.read_text(encoding="utf-8"))
    assert holders == ["core/languages.py"]
