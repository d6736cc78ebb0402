"""Blocks of the on-disk index (adapters/index_blocks.py): what is encoded reads back key by key,
blocks are cut at chunks, by bytes and around long rows, and a batch's rows laid out as blocks
(index_rows.FreshRows.blocks) hold exactly its rows."""

from __future__ import annotations

import random
from itertools import pairwise

import numpy as np
import pytest

from margin.adapters import index_blocks, index_rows


def test_a_block_reads_back_each_key_and_nothing_else():
    keys = ["/path", "a", "bb", "résumé", "zz"]
    rows = [index_rows.encode(0, [(d, d + 1)]) for d in range(len(keys))]
    names, data = index_blocks.encode(keys, rows)
    assert names == "\n/path\na\nbb\nrésumé\nzz\n"
    assert index_blocks.decode(names, data) == dict(zip(keys, rows, strict=True))
    # where SQL's instr() finds "\nkey\n" (1-based, in characters)
    assert [index_blocks.row_at(names, data, names.find(f"\n{key}\n") + 1) for key in keys] == rows


def test_blocks_begin_at_each_chunk_at_each_window_of_bytes_and_around_a_long_row():
    size = index_blocks.BLOCK_BYTES
    sizes = np.array([10] * 300 + [size] + [10] * 5 + [10] * 3, dtype=np.int64)
    chunks = np.array([0] * 306 + [1] * 3, dtype=np.int64)
    starts = index_blocks.starts_of(sizes, chunks).tolist()
    assert starts[0] == 0 and 300 in starts and 301 in starts and 306 in starts  # the long row alone; chunk 1
    assert all(b - a <= size // 10 + 1 for a, b in pairwise(starts))  # ~BLOCK_BYTES each
    assert index_blocks.starts_of(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).tolist() == []


@pytest.mark.parametrize("seed", range(5))
def test_a_batchs_blocks_hold_its_rows(seed):
    rng = random.Random(seed)
    fresh = index_rows.FreshRows(64)
    vocabulary = [f"k{n}" for n in range(400)] + ["common"]
    for doc in range(rng.randint(1, 200)):
        keys = sorted(set(rng.sample(vocabulary, rng.randint(1, 60))) | {"common"})
        fresh.add(doc, " ".join(keys), [rng.choice((1, 2, 3, 300)) for _ in keys])
    rows = fresh.blocks(merged=range(8))[1]  # every chunk's, as rows
    merged = {rows[0][0]} if seed % 2 else set()
    blocks, apart = fresh.blocks(merged)
    assert apart == [row for row in rows if row[0] in merged]
    got = [(chunk, key, row) for chunk, first, names, data in blocks
           for key, row in index_blocks.decode(names, data).items()]
    assert got == [row for row in rows if row[0] not in merged]
    assert all(first == index_blocks.key_list(names)[0] for _, first, names, _ in blocks)
