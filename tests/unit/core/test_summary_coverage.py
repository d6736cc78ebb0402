"""Summary coverage: the identifiers of folded turns that a summary names or a pointer can still
bring back."""

from __future__ import annotations

from margin.core.summary import coverage, identifiers


def test_identifiers_are_names_that_look_like_code_not_prose():
    text = "Rename parse_step in parser.py to fooBar; HTTPClient and v2_api stay. The Thing is x1."
    assert identifiers(text) == {"parse_step", "parser.py", "fooBar", "HTTPClient", "v2_api"}


def test_coverage_counts_names_in_the_summary_or_still_recallable_once():
    folded = ["def parse_step(): pass  # in parser.py", "reply: use fooBar and load_all", "edit cache_key"]
    recallable = ["def parse_step(): pass  # in parser.py"]
    got = coverage(folded, recallable, "Decided: fooBar replaces parse_step.")
    assert (got.total, got.in_summary, got.kept) == (5, 2, 3)  # parse_step, fooBar named; parser.py recallable
    assert got.share == 3 / 5


def test_a_summary_that_names_nothing_keeps_only_what_is_recallable():
    got = coverage(["load_all", "cache_key"], [], "We talked.")
    assert got.share == 0.0 and coverage([], [], "").share == 1.0
