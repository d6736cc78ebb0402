"""The ranking formula: similarity, priority, recency and type, weighted and summed.

The design seed's memory ranking is `similarity·0.4 + priority·0.3 + recency·0.2 + type·0.1`
with type priorities core 100 / explicit 90 / fact 80. Retrieved workspace snippets are all
"fact" memories, so `type` is the constant 0.8 (it keeps scores comparable with other memory
kinds and never reorders snippets). Each component is in [0, 1]:

- `similarity`: the text match — BM25 of the file's code plus `path_weight` × BM25 of its path
  terms plus `subject_weight` × BM25 of the subjects of the commits that touched it —
  normalised by the best candidate's, so the top match has 1;
- `priority`: the file's tie to what the user is doing — its co-change with the open and
  edited files (`History.cochange`), 1 for a file edited in the editor, and `feedback` × its
  co-change with the best text matches (a test file changed with the module that matched);
- `recency`: `History.recency`, how much the file has been changed lately.

`Weights()` are the defaults: similarity 0.6, priority 0.2, recency 0.2, type 0.1, path 2,
subjects 1, feedback 0.5 — the best of a 72-point grid (recency, priority, path, subject and
feedback weights) on the older half of the httpx replay (benchmarks/eval_retrieval.py; the
package docstring has the figures). The seed's 0.4 / 0.3 / 0.2 gave the tuning half R@5 0.768,
MRR 0.733 against 0.794, 0.731 here, and the open-file variant MRR 0.63 against 0.67: its
priority weight lets co-change outvote the text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

FACT_TYPE = 0.8
"""The seed's type priority for a fact (80 of 100)."""


@dataclass(frozen=True, slots=True)
class Weights:
    similarity: float = 0.6
    priority: float = 0.2
    recency: float = 0.2
    type: float = 0.1
    path_weight: float = 2.0
    """BM25 of the path terms, relative to the code's."""
    subject_weight: float = 1.0
    """BM25 of past commit subjects, relative to the code's."""
    feedback: float = 0.5
    """Priority from co-change with the best `feedback_files` text matches, relative to
    co-change with the files the user has open or edited."""
    feedback_files: int = 3

    def but(self, **changes: Any) -> Weights:
        return replace(self, **changes)


DEFAULT_WEIGHTS = Weights()


@dataclass(frozen=True, slots=True)
class FileScore:
    file_id: str
    score: float
    similarity: float
    priority: float
    recency: float
    type: float = FACT_TYPE


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved snippet: lines `start_line` to `end_line` (0-based, end exclusive) of
    `file_id`. `score` is the final score; the components are those of the formula, with
    `similarity` the mean of the file's and the window's normalised similarity."""

    file_id: str
    start_line: int
    end_line: int
    score: float
    similarity: float
    priority: float
    recency: float
    type: float = FACT_TYPE


def combine(weights: Weights, similarity: float, priority: float, recency: float,
            type_: float = FACT_TYPE) -> float:
    return (weights.similarity * similarity + weights.priority * priority
            + weights.recency * recency + weights.type * type_)
