"""dense.best: the pool's documents found through a sample's floor are exactly those of the
plain definition (every document above 0 scoring at least the pool-th best), ties included."""

from __future__ import annotations

import numpy as np
import pytest

from margin.core.retrieval import dense


def plain(scores: np.ndarray, pool: int) -> list[int]:
    above = [d for d, s in enumerate(scores.tolist()) if s > 0]
    if len(above) <= pool:
        return above
    floor = sorted((scores[d] for d in above), reverse=True)[pool - 1]
    return [d for d in above if scores[d] >= floor]


@pytest.mark.parametrize("seed", range(6))
def test_best_is_the_plain_definition_on_dense_sparse_and_tied_scores(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for case in range(300):
        n = int(rng.integers(0, 4000))
        scores = np.zeros(n)
        held = rng.choice(n, int(rng.integers(0, n + 1)), replace=False) if n else np.zeros(0, dtype=int)
        # few distinct values (a common term's scores tie) or many
        scores[held] = rng.integers(1, 5, len(held)) / 3.0 if case % 2 else rng.random(len(held)) + 1e-9
        pool = int(rng.integers(1, 400))
        assert dense.best(scores, pool).tolist() == plain(scores, pool), (n, len(held), pool)


def test_the_sample_floor_is_taken_when_most_documents_score() -> None:
    """A common term's scores: the sample holds the pool, so few are partitioned, and the
    pool-th best's ties all come back."""
    scores = np.linspace(1.0, 2.0, 50_000)
    scores[-300:] = 3.0  # 300 tied at the top, pool 200: all 300
    assert dense.best(scores, 200).tolist() == list(range(49_700, 50_000))
    scores[::2] = 0.0
    assert dense.best(scores, 10).tolist() == plain(scores, 10)
