"""One map from a file's extension to its language id, for files Margin reads from disk."""

from __future__ import annotations

from margin.core.languages import LANGUAGES, language_of
from margin.services import retrieval


def test_a_file_gets_the_id_vs_code_gives_its_extension_in_any_case():
    assert language_of("src/app.py", "plaintext") == "python"
    assert language_of("/w/View.TSX", "plaintext") == "typescriptreact"
    assert language_of("run.sh", "text") == "shellscript"


def test_an_unknown_or_missing_extension_gets_the_callers_default():
    assert language_of("notes.txt", "plaintext") == "plaintext"
    assert language_of("Makefile", "text") == "text"
    assert language_of("archive.tar.gz", "text") == "text"


def test_retrieval_fences_its_snippets_by_the_same_map():
    assert retrieval.LANGUAGES == LANGUAGES
