"""The compact code field (`Postings`) scores exactly like the dict-based `bm25.Field`."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.retrieval import postings as postings_module
from margin.core.retrieval.bm25 import Field
from margin.core.retrieval.postings import Postings

TERMS = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
documents = st.dictionaries(st.sampled_from(TERMS), st.integers(1, 70_000), max_size=6)
operations = st.lists(st.tuples(st.integers(0, 7), st.one_of(st.none(), documents)), max_size=40)
queries = st.lists(st.sampled_from(TERMS + ["absent"]), min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(operations, queries, st.sampled_from([None, 1, 2, 5]))
def test_postings_score_like_a_field_through_adds_and_removes(ops, query, pool):
    field, postings = Field(), Postings()
    held: dict[int, dict[str, int]] = {}
    for doc, counts in ops:
        if doc in held:
            field.remove(doc, held[doc])
            postings.remove(doc, sorted(held.pop(doc)))
        if counts is not None:
            terms = sorted(counts)
            field.add(doc, counts)
            postings.add(doc, terms, [counts[t] for t in terms])
            held[doc] = counts
    assert len(postings) == len(field) == len(held)
    for term in TERMS:
        assert postings.idf(term) == field.idf(term)
        assert postings.df(term) == sum(term in c for c in held.values())
    expected = field.score(query, pool)
    original = postings_module._SCAN
    try:
        for scan in (0, 1, original, 1000):  # walk the posting lists, or bisect them, or a mix
            postings_module._SCAN = scan
            assert postings.score(query, pool) == expected
    finally:
        postings_module._SCAN = original
    if not held:
        assert postings.postings == {} and postings.total_length == 0
