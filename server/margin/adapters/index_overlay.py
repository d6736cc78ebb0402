"""What one server's open buffers add to a workspace's index on disk (adapters.index_db): the
buffers whose text is not the file's on disk, indexed in memory for this server alone. The file
on disk is shared by the folder's servers, so it holds what is saved; an editor's unsaved text
stays with the editor's own server.

At query time an overlaid file takes the place of its version on disk: its document on disk is
masked out of every posting and its lengths out of the totals, and it comes back as a document
of its own, numbered past the disk's, so BM25 scores it as if the disk held the buffer's text.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from margin.core.retrieval.dense import Posting
from margin.core.retrieval.filedata import FileData
from margin.core.retrieval.terms import path_terms


@dataclass(frozen=True)
class Overlaid:
    entry: FileData
    terms: dict[str, int]
    """the file's terms with their counts (lines holding each)"""
    paths: Counter[str]


class Overlay:
    def __init__(self) -> None:
        self.files: dict[str, Overlaid] = {}

    def put(self, file_id: str, entry: FileData) -> None:
        self.files[file_id] = Overlaid(entry, dict(zip(entry.term_list(), entry.counts, strict=True)),
                                       Counter(path_terms(file_id)))

    def remove(self, file_id: str) -> bool:
        return self.files.pop(file_id, None) is not None

    def view(self, on_disk: dict[str, int], first: int) -> View:
        """The overlay over a disk whose overlaid files are the documents `on_disk` (file id →
        number), its own documents numbered from `first`."""
        return View(self, on_disk, first)


class View:
    """The overlay at one query: which documents on disk it masks, and its own numbers."""

    def __init__(self, overlay: Overlay, on_disk: dict[str, int], first: int) -> None:
        files = dict(overlay.files)  # as it is now (another thread may put a buffer meanwhile)
        self.names = sorted(files)
        self.files = [files[name] for name in self.names]
        self.docs = {name: first + i for i, name in enumerate(self.names)}
        self.first = first
        self.masked = np.array(sorted(on_disk.values()), dtype=np.int64)

    def name(self, doc: int) -> str | None:
        return self.names[doc - self.first] if doc >= self.first else None

    def postings(self, found: dict[str, Posting], terms: list[str], path: bool) -> dict[str, Posting]:
        """`found` (term → posting on disk) with the masked documents out and the overlaid
        files in."""
        out = {}
        for term in dict.fromkeys(terms):
            posting = found.get(term)
            docs = [(self.first + i, tf) for i, file in enumerate(self.files)
                    if (tf := (file.paths if path else file.terms).get(term, 0))]
            if posting is not None and len(self.masked):
                keep = ~np.isin(posting.docs, self.masked)
                posting = Posting(posting.docs[keep], posting.tfs[keep])
            if docs:
                added = Posting(np.array([d for d, _ in docs], dtype=np.int64), np.array([tf for _, tf in docs]))
                posting = added if posting is None else Posting(
                    np.concatenate([posting.docs.astype(np.int64), added.docs]),
                    np.concatenate([posting.tfs.astype(np.int64), added.tfs]))
            if posting is not None and len(posting.docs):
                out[term] = posting
        return out

    def totals(self, count: int, total: int, lengths: np.ndarray, path: bool) -> tuple[int, int, np.ndarray]:
        """The document count, total length and lengths by document with the overlay in."""
        own = [sum(file.paths.values()) if path else sum(file.entry.counts) for file in self.files]
        masked = int(lengths[self.masked].sum()) if len(self.masked) else 0
        grown = np.zeros(self.first + len(own))
        grown[:len(lengths)] = lengths
        grown[self.first:] = own
        return count - len(self.masked) + len(own), total - masked + sum(own), grown
