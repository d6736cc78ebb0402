"""BM25 from postings rows in C (_fastrows.c): see index_rows.Rows."""

import numpy as np

def accumulate(scores: np.ndarray, lengths: np.ndarray, rows: list[bytes], starts: list[int], idf: float, a: float,
               c: float, /) -> None: ...
