"""The retrieval index: files → terms, kept one file at a time, ranked by `rank.py`'s formula.

Each file is kept as its line count and, per term, a bit mask of the lines holding the term
(`_Entry.masks`). From that: the file-level BM25 field (term frequency = lines holding the
term), the path field, and at query time any line window's term frequencies by `popcount`, so
windows of any size are scored without storing them. `put` re-indexes one file in time
proportional to that file; `search` scores files through the inverted index (only files that
share a query term), then windows inside the best files only.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from typing import Collection, Mapping

from margin.core.retrieval.bm25 import Field
from margin.core.retrieval.rank import DEFAULT_WEIGHTS, FACT_TYPE, FileScore, Hit, Weights, combine
from margin.core.retrieval.signals import Signals
from margin.core.retrieval.terms import line_terms, path_terms, text_terms

WINDOW_LINES = 30
WINDOW_STRIDE = 10
EXPORT_VERSION = 1
CANDIDATE_POOL = 200
"""Files whose code score is exact at query time (`Field.score`'s pool): past the best 200 by
code alone, a file can still be ranked through its path, history or co-change, with its code
score possibly under-counted. A workspace this small is scored exactly."""
_K1 = 1.2


@dataclass(slots=True)
class _Entry:
    fingerprint: str
    lines: int
    masks: dict[str, int]
    path: Counter[str]


class RetrievalIndex:
    """See the package docstring for the API."""

    def __init__(self, weights: Weights = DEFAULT_WEIGHTS) -> None:
        self.weights = weights
        self._files: dict[str, _Entry] = {}
        self._content = Field(k1=_K1, b=0.75)
        self._paths = Field(k1=_K1, b=0.3)

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
        lines_of: dict[str, list[int]] = {}
        all_lines = text.split("\n")
        for number, terms in enumerate(line_terms(all_lines)):
            for term in terms:
                found = lines_of.get(term)
                if found is None:
                    lines_of[term] = [number]
                elif found[-1] != number:
                    found.append(number)
        masks = {term: sum(1 << n for n in numbers) for term, numbers in lines_of.items()}
        self._store(file_id, _Entry(fingerprint, len(all_lines), masks, Counter(path_terms(file_id))),
                    {term: len(numbers) for term, numbers in lines_of.items()})
        return True

    def remove(self, file_id: str) -> bool:
        entry = self._files.pop(file_id, None)
        if entry is None:
            return False
        self._content.remove(file_id, entry.masks)
        self._paths.remove(file_id, entry.path)
        return True

    def export_file(self, file_id: str) -> dict:
        """One file's indexed form, JSON-serialisable, for `import_file` to reload without
        re-reading or re-tokenising the file. Raises KeyError if the file is not indexed."""
        entry = self._files[file_id]
        return {"v": EXPORT_VERSION, "lines": entry.lines,
                "masks": {term: format(mask, "x") for term, mask in entry.masks.items()}}

    def import_file(self, file_id: str, fingerprint: str, data: Mapping) -> bool:
        """Reload `export_file`'s output. False (nothing done) if `data` is from another version
        of the format: the caller should `put` the file instead."""
        if data.get("v") != EXPORT_VERSION:
            return False
        masks = {term: int(mask, 16) for term, mask in data["masks"].items()}
        self._store(file_id, _Entry(fingerprint, int(data["lines"]), masks, Counter(path_terms(file_id))),
                    {term: mask.bit_count() for term, mask in masks.items()})
        return True

    def _store(self, file_id: str, entry: _Entry, counts: dict[str, int]) -> None:
        self.remove(file_id)
        self._files[file_id] = entry
        self._content.add(file_id, counts)
        self._paths.add(file_id, entry.path)

    # ---- ranking -----------------------------------------------------------------------------

    def rank_files(self, query: str, *, limit: int = 10, signals: Signals | None = None,
                   exclude: Collection[str] = ()) -> list[tuple[str, float]]:
        """The best `limit` files for `query`, as (file_id, final score), best first."""
        return [(s.file_id, s.score) for s in self.score_files(query, limit=limit, signals=signals,
                                                                 exclude=exclude)]

    def score_files(self, query: str, *, limit: int = 10, signals: Signals | None = None,
                    exclude: Collection[str] = ()) -> list[FileScore]:
        """`rank_files` with every component of each file's score."""
        return self._score_files(_query_terms(query), limit, signals, exclude)

    def _score_files(self, terms: list[str], limit: int, signals: Signals | None,
                     exclude: Collection[str]) -> list[FileScore]:
        w = self.weights
        files = self._files
        pool = max(CANDIDATE_POOL, 4 * limit)
        similarity = self._content.score(terms, pool)
        if w.path_weight:
            _add(similarity, self._paths.score(terms, pool), w.path_weight)
        history = signals.history if signals else None
        if history is not None and w.subject_weight:
            subjects = {p: s for p, s in history.subjects.score(terms, pool).items() if p in files}
            _add(similarity, subjects, w.subject_weight)
        priority: dict[str, float] = {}
        if history is not None and w.feedback and similarity:
            best = heapq.nsmallest(w.feedback_files, similarity, key=lambda f: (-similarity[f], f))
            priority = {p: w.feedback * s for p, s in history.cochange(best).items() if p in files}
        if signals is not None:
            context = signals.context_files()
            if history is not None and context:
                for p, s in history.cochange(context).items():
                    if p in files and s > priority.get(p, 0.0):
                        priority[p] = s
            for path in signals.edited:
                if path in files:
                    priority[path] = 1.0
        recency = history.recency if history is not None else {}
        top = max(similarity.values(), default=0.0) or 1.0
        for file_id in priority.keys() - similarity.keys():
            similarity[file_id] = 0.0
        excluded = exclude if isinstance(exclude, (set, frozenset)) else set(exclude)
        pri_get, rec_get = priority.get, recency.get
        # combine(), inlined with the same operations: a tuple per candidate, objects for the best.
        ws, wp, wr, wt = w.similarity, w.priority, w.recency, w.type * FACT_TYPE
        keyed = [(-(ws * (s / top) + wp * pri_get(f, 0.0) + wr * rec_get(f, 0.0) + wt), f)
                 for f, s in similarity.items() if f not in excluded]
        best = heapq.nsmallest(limit, keyed)
        return [FileScore(f, -neg, similarity[f] / top, pri_get(f, 0.0), rec_get(f, 0.0)) for neg, f in best]

    def search(self, query: str, *, limit: int = 8, signals: Signals | None = None,
               exclude: Collection[str] = (), per_file: int = 2) -> list[Hit]:
        """The best `limit` line windows (`WINDOW_LINES` long, at most `per_file` per file, not
        overlapping) from the best files by `score_files`; files in `exclude` are never
        returned (they still count as context through `signals`)."""
        terms = _query_terms(query)
        ranked = self._score_files(terms, max(limit, 4), signals, exclude)
        idf = {t: self._content.idf(t) for t in terms}
        found = []
        for fs in ranked:
            for start, end, window_score in self._best_windows(self._files[fs.file_id], idf, per_file):
                found.append((fs, start, end, window_score))
        top = max((f[3] for f in found), default=0.0) or 1.0
        hits = []
        for fs, start, end, window_score in found:
            sim = (fs.similarity + window_score / top) / 2
            hits.append(Hit(fs.file_id, start, end, combine(self.weights, sim, fs.priority, fs.recency),
                            sim, fs.priority, fs.recency, FACT_TYPE))
        hits.sort(key=lambda h: (-h.score, h.file_id, h.start_line))
        return hits[:limit]

    @staticmethod
    def _best_windows(entry: _Entry, idf: dict[str, float], per_file: int) -> list[tuple[int, int, float]]:
        masks = [(entry.masks[t], weight) for t, weight in idf.items() if t in entry.masks and weight > 0]
        lines = entry.lines
        full = (1 << WINDOW_LINES) - 1
        last = max(lines - WINDOW_LINES, 0)
        starts = list(range(0, last + 1, WINDOW_STRIDE))
        if starts[-1] != last:
            starts.append(last)
        scored = []
        for start in starts:
            window = full << start
            score = 0.0
            for mask, weight in masks:
                tf = (mask & window).bit_count()
                if tf:
                    score += weight * tf * (_K1 + 1) / (tf + _K1)
            scored.append((score, -start))
        scored.sort(reverse=True)
        chosen: list[tuple[int, int, float]] = []
        for score, neg_start in scored:
            start = -neg_start
            if all(start >= e or start + WINDOW_LINES <= s for s, e, _ in chosen):
                chosen.append((start, min(start + WINDOW_LINES, lines), score))
                if len(chosen) == per_file or score == 0.0:
                    break
        return chosen


def _query_terms(query: str) -> list[str]:
    return list(dict.fromkeys(text_terms(query)))


def _add(into: dict[str, float], scores: dict[str, float], weight: float) -> None:
    for key, value in scores.items():
        into[key] = into.get(key, 0.0) + weight * value
