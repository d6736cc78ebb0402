"""Postings rows and packed files of the on-disk index (adapters/index_rows.py): what is written
reads back, and a row merged with changes holds exactly the documents a dict would, on both
the short (Python) and the long (numpy) path, with term frequencies of any width."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from margin.adapters import _fastrows, index_rows
from margin.core.index_store import IndexUnavailable
from margin.core.retrieval import _fastterms, dense, filedata


@pytest.mark.parametrize("seed", range(30))
def test_a_merged_row_holds_what_a_dict_would(seed):
    rng = random.Random(seed)
    start = rng.choice((0, 2048, 4096 * 7))
    wide = seed % 5 == 0
    before = {start + d: rng.randint(1, 70_000 if wide else 9) for d in rng.sample(range(2048), rng.randint(0, 300))}
    row = index_rows.encode(start, sorted(before.items())) if before else None
    part = {start + d: rng.choice((0, 0, rng.randint(1, 9))) for d in rng.sample(range(2048), rng.randint(1, 40))}
    want = {d: tf for d, tf in {**before, **part}.items() if tf}
    got = index_rows.merged(start, row, part)
    if got is None:
        assert want == before
    elif got == b"":
        assert want == {}
    else:
        posting = index_rows.decode(start, got)
        assert dict(zip(posting.docs.tolist(), posting.tfs.tolist(), strict=True)) == want
        assert posting.docs.tolist() == sorted(want) and index_rows.size(got) == len(want)


def test_an_unchanged_row_is_not_written_again():
    row = index_rows.encode(0, [(3, 2), (9, 1)])
    assert index_rows.merged(0, row, {3: 2}) is None
    assert index_rows.merged(0, row, {5: 0}) is None
    assert index_rows.merged(0, None, {5: 0}) == b""


@pytest.mark.parametrize("text", ["", "x\n", "def read_body(self):\n    return self.body\n" * 40, "a_b\n" * 70_000])
def test_a_packed_file_reads_back(text):
    entry = filedata.from_text(text, "sha256:f")
    packed = index_rows.pack_file(entry)
    back = index_rows.unpack_file(packed, "sha256:f", entry.lines)
    assert (back.terms, back.counts, back.positions, back.lines) == (entry.terms, entry.counts, entry.positions,
                                                                      entry.lines)
    assert index_rows.file_terms(packed) == entry.terms


def numberings() -> list[Any]:
    """The key numberings FreshRows runs on: the C one (core.retrieval._fastterms), the Python one."""
    return [pytest.param(_fastterms.KeyNumbers, id="C"), pytest.param(index_rows.KeyNumbers, id="Python")]


@pytest.mark.parametrize("numbering", numberings())
def test_fresh_rows_are_the_rows_encode_makes(numbering):
    """A build's rows, made by appending, read back as `encode`'s of the same pairs, a term
    frequency of 65,536 or more widening its row."""
    rng = random.Random(7)
    fresh, want = index_rows.FreshRows(64, numbering()), {}
    for doc in range(0, 300, 3):
        counts = {key: rng.choice((1, 2, 1500, 70_000)) if key == "w" else rng.randint(1, 5)
                  for key in rng.sample(["a", "b", "w", "/p"], rng.randint(1, 4))}
        fresh.add(doc, " ".join(counts), list(counts.values()))
        for key, tf in counts.items():
            want.setdefault((doc // 64, key), []).append((doc, tf))
    rows = fresh.blocks(merged=range(8))[1]  # every chunk's, as rows
    assert [(chunk, key) for chunk, key, _ in rows] == sorted(want)
    for chunk, key, row in rows:
        posting = index_rows.decode(chunk * 64, row)
        assert list(zip(posting.docs.tolist(), posting.tfs.tolist(), strict=True)) == want[chunk, key]
    assert any(row[0] == 4 for _, key, row in rows if key == "w")


def test_a_terms_rows_of_several_chunks_decode_as_one_posting():
    """decode_rows, all at once, is each row's `decode` concatenated: rows of 1-byte term
    frequencies, of 2-byte ones, and of mixed widths."""
    rng = random.Random(3)
    for variant in ("narrow", "all 2-byte", "mixed"):
        starts = [0, 64, 192]
        pairs = [sorted({start + rng.randrange(64): rng.randint(1, 9) for _ in range(rng.randint(1, 20))}.items())
                 for start in starts]
        if variant == "all 2-byte":
            pairs = [[(part[0][0], 300), *part[1:]] for part in pairs]
        if variant == "mixed":
            pairs[1][0] = (pairs[1][0][0], 70_000)
        rows = [index_rows.encode(start, part) for start, part in zip(starts, pairs, strict=True)]
        assert sorted({row[0] for row in rows}) == {"narrow": [1], "all 2-byte": [2], "mixed": [1, 4]}[variant]
        posting = index_rows.decode_rows(starts, rows)
        assert list(zip(posting.docs.tolist(), posting.tfs.tolist(), strict=True)) == [p for part in pairs for p in part]
    one = index_rows.decode_rows([64], [index_rows.encode(64, [(70, 2)])])
    assert (one.docs.tolist(), one.tfs.tolist()) == ([70], [2])


def test_both_key_numberings_give_each_key_one_number_and_sort_alike():
    rng = random.Random(5)
    vocabulary = [f"k{n}" for n in range(300)] + ["/path", "café", "a", "ab", "b", "Z", "_x"]
    added = [" ".join(rng.sample(vocabulary, rng.randint(0, 40))) for _ in range(200)]
    for numbering in (_fastterms.KeyNumbers(), index_rows.KeyNumbers()):
        numbers = [np.frombuffer(numbering.add(keys), dtype=np.int64).tolist() for keys in added]
        names, numbered = numbering.sorted()
        assert names == sorted(set(" ".join(added).split()))
        assert len(numbering) == len(names)
        name_of = dict(zip(np.frombuffer(numbered, dtype=np.int64).tolist(), names, strict=True))
        assert len(name_of) == len(names)  # one number a key
        assert [" ".join(name_of[n] for n in row) for row in numbers] == added
        assert np.frombuffer(numbering.add(""), dtype=np.int64).tolist() == []
    assert np.frombuffer(_fastterms.KeyNumbers().add("b a b"), dtype=np.int64).tolist() == [0, 1, 0]


def test_fresh_rows_refuse_keys_and_term_frequencies_of_different_lengths():
    with pytest.raises(ValueError, match="2 keys but 1 term frequencies"):
        index_rows.FreshRows(64).add(0, "a b", [1])


def test_a_row_is_as_wide_as_its_largest_term_frequency_needs():
    """1 byte a term frequency up to 255, 2 up to 65,535, 4 beyond: a row of ones is 3 bytes a
    document; FreshRows makes a row as wide as its largest."""
    assert [index_rows.encode(0, [(0, tf)])[0] for tf in (1, 255, 256, 65_535, 65_536)] == [1, 1, 2, 2, 4]
    assert len(index_rows.encode(0, [(d, 1) for d in range(10)])) == 1 + 3 * 10
    fresh = index_rows.FreshRows(64)
    for doc, tf in enumerate((1, 7, 300, 2, 70_000, 3)):
        fresh.add(doc, "t", [tf])
    ((_, _, row),) = fresh.blocks(merged=[0])[1]
    assert row[0] == 4 and index_rows.decode(0, row).tfs.tolist() == [1, 7, 300, 2, 70_000, 3]


@pytest.mark.parametrize("widths", [(1, 1), (1, 2), (4, 1), (2, 4)])
def test_a_row_appended_to_holds_both_rows_documents_at_its_width(widths):
    """The rows a build's batch adds to the chunk the last batch ended in are appended to the
    rows there (their documents all come later), widened to the larger width."""
    big = {1: 1, 2: 300, 4: 70_000}
    first = [(0, 1), (5, big[widths[0]])]
    later = [(9, big[widths[1]]), (40, 2)]
    row = index_rows.appended(index_rows.encode(0, first), index_rows.encode(0, later))
    assert row == index_rows.encode(0, first + later)
    assert row[0] == max(widths)


def random_rows(rng: random.Random, chunk: int, chunks: int) -> tuple[list[int], list[bytes]]:
    """One term's rows in `chunks` chunks of `chunk` documents, of mixed widths."""
    starts, rows = [], []
    for n in sorted(rng.sample(range(chunks * 2), chunks)):
        docs = sorted(rng.sample(range(chunk), rng.randint(1, chunk // 2)))
        big = rng.choice((9, 300, 70_000))
        starts.append(n * chunk)
        rows.append(index_rows.encode(n * chunk, [(n * chunk + d, rng.randint(1, big)) for d in docs]))
    return starts, rows


@pytest.mark.parametrize("seed", range(6))
def test_bm25_from_rows_gives_the_decoded_postings_floats_in_c_and_in_python(seed, monkeypatch):
    """Rows add their BM25 straight from the bytes (C, _fastrows.c) with the very floats that the
    decoded posting's numpy gives, and so does the Python fallback; bm25's best are the same."""
    rng = random.Random(seed)
    chunk, chunks = 64, 5
    lengths = np.array([float(rng.randint(1, 5000)) for _ in range(chunk * chunks * 2)])
    terms = {f"t{n}": random_rows(rng, chunk, rng.randint(1, chunks)) for n in range(4)}
    decoded = {t: index_rows.decode_rows(starts, rows) for t, (starts, rows) in terms.items()}
    want = dense.bm25(decoded, len(lengths), int(lengths.sum()), lengths, 0.75, 40)
    assert index_rows._FAST_ROWS
    for fast in (True, False):
        monkeypatch.setattr(index_rows, "_FAST_ROWS", fast)
        rows = {t: index_rows.Rows(starts, rows) for t, (starts, rows) in terms.items()}
        assert [r.df for r in rows.values()] == [len(p.docs) for p in decoded.values()]
        assert dense.bm25(rows, len(lengths), int(lengths.sum()), lengths, 0.75, 40) == want
        for t, r in rows.items():
            one, other = np.zeros(len(lengths)), np.zeros(len(lengths))
            r.add_to(one, lengths, 2.5, 0.3, 0.0007)
            decoded[t].add_to(other, lengths, 2.5, 0.3, 0.0007)
            assert one.tobytes() == other.tobytes()
            assert r.docs.tolist() == decoded[t].docs.tolist() and r.tfs.tolist() == decoded[t].tfs.tolist()


def test_bm25_from_rows_refuses_damaged_rows_and_wrong_arrays():
    scores, lengths = np.zeros(10), np.ones(10)
    good = index_rows.encode(0, [(1, 2), (9, 1)])
    _fastrows.accumulate(scores, lengths, [good], [0], 1.0, 0.5, 0.1)
    assert np.flatnonzero(scores).tolist() == [1, 9]
    for rows, starts, message in (([good[:-1]], [0], "damaged"), ([b"\x03" + good[1:]], [0], "damaged"),
                                  ([b""], [0], "damaged"), ([good], [8], "names document 17 of 10"),
                                  ([good], [0, 1], "differ in length")):
        before = scores.copy()
        with pytest.raises(ValueError, match=message):
            _fastrows.accumulate(scores, lengths, rows, starts, 1.0, 0.5, 0.1)
        if message == "names document 17 of 10":  # the documents before the bad one were added
            continue
        assert scores.tobytes() == before.tobytes()
    with pytest.raises(TypeError, match="scores must be a contiguous float64 array"):
        _fastrows.accumulate(np.zeros(10, dtype=np.float32), lengths, [good], [0], 1.0, 0.5, 0.1)
    with pytest.raises(TypeError, match="lengths must be a contiguous float64 array"):
        _fastrows.accumulate(scores, np.ones(10, dtype=np.int64), [good], [0], 1.0, 0.5, 0.1)
    with pytest.raises(ValueError, match="not C-contiguous"):
        _fastrows.accumulate(scores, np.ones(20)[::2], [good], [0], 1.0, 0.5, 0.1)


@pytest.mark.parametrize("fast", [True, False])
def test_a_damaged_row_makes_the_index_unavailable_for_the_query_by_name(fast, monkeypatch):
    """A postings row damaged on disk fails the query as IndexUnavailable, which retrieval
    answers with no snippets (and a warning), in C and in Python alike."""
    monkeypatch.setattr(index_rows, "_FAST_ROWS", fast)
    good = index_rows.encode(0, [(1, 2), (9, 1)])
    past_the_end = index_rows.encode(64, [(64 + 70, 1)])  # document 134 of 128
    for damaged in (good[:-1], b"\x03" + good[1:], b"", b"\x02" + good[1:], past_the_end):
        with pytest.raises(IndexUnavailable, match="a damaged postings row"):
            dense.bm25({"t": index_rows.Rows([0, 64], [good, damaged])}, 128, 128, np.ones(128), 0.75, 10)
