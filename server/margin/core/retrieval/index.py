"""The retrieval index: files → terms, kept one file at a time, ranked by `rank.py`'s formula.

Each file is kept as a `filedata.FileData`: its line count, its sorted distinct terms and, per
term, the sorted numbers of the lines holding it, in flat `array`s. From that: the file-level
BM25 field (`postings.Postings`: term frequency = lines holding the term; files numbered by the
index), the path field, and at query time any line window's term frequencies by bisecting the
line numbers, so windows of any size are scored without storing them. `put` re-indexes one file
in time proportional to that file; `search` scores files through the inverted index (only files
that share a query term), then windows inside the best files only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from margin.core.retrieval import filedata, ranking
from margin.core.retrieval.bm25 import Field
from margin.core.retrieval.filedata import FileData
from margin.core.retrieval.postings import Postings
from margin.core.retrieval.rank import DEFAULT_WEIGHTS, FileScore, Hit, Weights
from margin.core.retrieval.ranking import (
    _K1,
    CANDIDATE_POOL,
    CONTENT_B,
    PATH_B,
    WINDOW_LINES,
    WINDOW_STRIDE,
    Names,
    query_terms,
)
from margin.core.retrieval.signals import Signals
from margin.core.retrieval.terms import path_terms

EXPORT_VERSION = filedata.FORMAT
__all__ = ["CANDIDATE_POOL", "WINDOW_LINES", "WINDOW_STRIDE", "_K1", "RetrievalIndex"]


class RetrievalIndex:
    """See the package docstring for the API."""

    def __init__(self, weights: Weights = DEFAULT_WEIGHTS) -> None:
        self.weights = weights
        self._files: dict[str, FileData] = {}
        self._names: list[str] = []
        """File id by document number (`FileData.doc`); "" for a free number."""
        self._free: list[int] = []
        self._content = Postings(k1=_K1, b=CONTENT_B)
        self._paths: Field[int] = Field(k1=_K1, b=PATH_B)
        """Path terms, by document number too."""

    # ---- maintenance -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, file_id: object) -> bool:
        return file_id in self._files

    def files(self) -> list[str]:
        return list(self._files)

    def fingerprint(self, file_id: str) -> str | None:
        entry = self._files.get(file_id)
        return entry.fingerprint if entry else None

    def put(self, file_id: str, text: str, fingerprint: str) -> bool:
        """Index `text` as `file_id`; False (and nothing done) when `fingerprint` is unchanged."""
        entry = self._files.get(file_id)
        if entry is not None and entry.fingerprint == fingerprint:
            return False
        self._store(file_id, filedata.from_text(text, fingerprint))
        return True

    def remove(self, file_id: str) -> bool:
        entry = self._files.pop(file_id, None)
        if entry is None:
            return False
        self._content.remove(entry.doc, entry.term_list())
        self._paths.remove(entry.doc, path_terms(file_id))
        self._names[entry.doc] = ""
        self._free.append(entry.doc)
        return True

    def export_file(self, file_id: str) -> dict[str, Any]:
        """One file's indexed form, JSON-serialisable, for `import_file` to reload without
        re-reading or re-tokenising the file. Raises KeyError if the file is not indexed."""
        return self._files[file_id].export()

    def import_file(self, file_id: str, fingerprint: str, data: Mapping[str, Any]) -> bool:
        """Reload `export_file`'s output. False (nothing done) if `data` is from another version
        of the format (or damaged): the caller should `put` the file instead."""
        entry = filedata.load(data, fingerprint)
        if entry is None:
            return False
        self._store(file_id, entry)
        return True

    def _store(self, file_id: str, entry: FileData) -> None:
        self.remove(file_id)
        if self._free:
            entry.doc = self._free.pop()
        else:
            entry.doc = len(self._names)
            self._names.append("")
        self._files[file_id] = entry
        self._names[entry.doc] = file_id
        self._content.add(entry.doc, entry.term_list(), entry.counts)
        self._paths.add(entry.doc, Counter(path_terms(file_id)))

    # ---- what ranking reads (ranking.Corpus) -------------------------------------------------

    def content_scores(self, terms: list[str], pool: int) -> dict[int, float]:
        return self._content.score(terms, pool)

    def path_scores(self, terms: list[str], pool: int) -> dict[int, float]:
        return self._paths.score(terms, pool)

    def docs_of(self, file_ids: Iterable[str]) -> dict[str, int]:
        files = self._files
        return {p: files[p].doc for p in file_ids if p in files}

    def names_of(self, docs: Iterable[int]) -> Names:
        return self._names  # every document's, by number

    def idf(self, term: str) -> float:
        return self._content.idf(term)

    def file_data(self, file_id: str) -> FileData | None:
        return self._files.get(file_id)

    # ---- ranking (core.retrieval.ranking) -----------------------------------------------------

    def rank_files(self, query: str, *, limit: int = 10, signals: Signals | None = None,
                   exclude: Collection[str] = ()) -> list[tuple[str, float]]:
        """The best `limit` files for `query`, as (file_id, final score), best first."""
        return [(s.file_id, s.score) for s in self.score_files(query, limit=limit, signals=signals,
                                                                 exclude=exclude)]

    def score_files(self, query: str, *, limit: int = 10, signals: Signals | None = None,
                    exclude: Collection[str] = ()) -> list[FileScore]:
        """`rank_files` with every component of each file's score."""
        return ranking.score_files(self, query_terms(query), limit, signals, exclude)

    def search(self, query: str, *, limit: int = 8, signals: Signals | None = None,
               exclude: Collection[str] = (), per_file: int = 2) -> list[Hit]:
        """The best `limit` line windows (ranking.search)."""
        return ranking.search(self, query, limit=limit, signals=signals, exclude=exclude, per_file=per_file)

    _best_windows = staticmethod(ranking.best_windows)
