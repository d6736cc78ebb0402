"""Workspace retrieval ("fact memories"): BM25 over files and line windows, path terms and git
signals, no vector database. Pure: the caller reads files and runs git.

API (the server keeps one `RetrievalIndex` per workspace):

- `RetrievalIndex()`; `put(file_id, text, fingerprint) -> bool` indexes one file (id = its
  workspace-relative path, "httpx/_client.py"), a no-op returning False when the fingerprint is
  unchanged, in time proportional to that file; `remove(file_id) -> bool`;
  `fingerprint(file_id)`, `len()`, `in`, `files()`.
- `export_file(file_id) -> dict` (JSON-serialisable) and `import_file(file_id, fingerprint,
  data) -> bool` persist and reload one file's indexed form without re-tokenising (False: an
  older format or damaged data, `put` the file instead).
- `search(query, *, limit=8, signals=None, exclude=()) -> list[Hit]`: line windows
  (`Hit.file_id, start_line, end_line` 0-based, end exclusive; `score` and its components),
  from the files `rank_files` ranks best; `exclude` = files already shown whole (open files):
  never returned, still used as context through `signals.active`.
- `rank_files(query, *, limit, signals, exclude) -> [(file_id, score)]` (and `score_files`,
  with the components): the file ranking `search` is built on, and the one the evaluation
  measures.
- `Signals(history, active, edited)`: `History(parse_git_log(git log output))` — see
  `signals.py` for the exact `git log` arguments (`GIT_LOG_ARGS`) — built once per HEAD, plus
  the open files and the files edited lately.

Storage (`filedata.py`, `postings.py`): each file is its distinct terms, sorted and joined in
one string, and two flat `array`s — per term the number of lines holding it, and those line
numbers back to back (2-byte items below 65,536 lines); a window's term frequency is two
bisects. The code's BM25 field numbers the files and keeps, per term, one int `file << 32 | tf`
while a single file holds it (most terms of a large workspace) or an `array('I')` of (file, tf)
pairs sorted by file; the path field is a small `bm25.Field`. Export format 2 is the term string
and the two arrays as base64 (format 1, bit masks as hex, is refused). On the generated
10,000-file / 1.49M-line workspace of benchmarks/bench_retrieval.py one index takes 218 MB
resident (211 MB of objects; the bit-mask index took 688 MB) and the server's gzipped
store of it 25.9 MB (was 29.2 MB), with the same rankings.

Ranking (`rank.py`): the design seed's `similarity·0.4 + priority·0.3 + recency·0.2 + type·0.1`
kept in shape, with weights 0.6 / 0.2 / 0.2 / 0.1: similarity = BM25 of the code + 2 × BM25 of
the path terms + 1 × BM25 of the subjects of past commits touching the file, normalised by the
best; priority = co-change with the open/edited files (1 for an edited file), and half that for
co-change with the three best text matches; recency = decayed change count; type = 0.8 (fact).
Replaying httpx's last 400 qualifying commits (benchmarks/eval_retrieval.py, tuned on the older
200 only): recall@5 0.775, recall@10 0.869, MRR 0.720 (whole-file BM25: 0.598 / 0.766 / 0.564);
on the newer 200 (held out) 0.756 / 0.853 / 0.710; with one changed file open 0.777 / 0.871 /
0.672. Without any git signal (not a repository): 0.731 / 0.811 / 0.666. Halving or doubling
any one weight moves each figure by at most 0.035. The weights that matter most are the path
weight (from 1 to 2: +0.02 R@5) and identifier compounds as terms (`raise_for_status` is also
`raiseforstatus`: +0.02–0.03 MRR); window-level evidence in the file score, BM25's b and k1,
and the recency half-life (30–300 commits) measured as noise (±0.01) and stay at the defaults.
"""

from margin.core.retrieval.index import RetrievalIndex
from margin.core.retrieval.rank import DEFAULT_WEIGHTS, FileScore, Hit, Weights
from margin.core.retrieval.signals import GIT_LOG_ARGS, Commit, History, HistoryWeights, Signals, parse_git_log
from margin.core.retrieval.terms import path_terms, split_identifier, text_terms

__all__ = [
           "DEFAULT_WEIGHTS",
           "GIT_LOG_ARGS",
           "Commit",
           "FileScore",
           "History",
           "HistoryWeights",
           "Hit",
           "RetrievalIndex",
           "Signals",
           "Weights",
           "parse_git_log",
           "path_terms",
           "split_identifier",
           "text_terms",
]
