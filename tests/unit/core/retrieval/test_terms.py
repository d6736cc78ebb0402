"""Identifier-aware terms: splitting, stemming, stopwords, path terms."""

from __future__ import annotations

import pytest

from margin.core.retrieval.terms import path_terms, split_identifier, stem, text_terms


@pytest.mark.parametrize("word, parts", [
    ("follow_redirects", ("follow", "redirect")),
    ("HTTPTransport", ("http", "transport")),
    ("parseHeaderValue", ("parse", "header", "value")),
    ("read_chunk2", ("read", "chunk", "2")),
    ("utf8", ("utf", "8")),
    ("__init__", ("init",)),
    ("URL", ("url",)),
    ("getHTTPResponseCode", ("get", "http", "response", "code")),
])
def test_identifiers_split_on_underscores_case_and_digits(word, parts):
    assert split_identifier(word) == parts


def test_stemming_folds_plurals_and_common_endings_alike():
    assert stem("redirects") == stem("redirect") == "redirect"
    assert stem("proxies") == "proxy"
    assert stem("streaming") == "stream"
    assert stem("class") == "class" and stem("status") == "status"


def test_text_terms_drop_stopwords_and_keep_compounds_of_multi_part_identifiers():
    terms = text_terms("def raise_for_status(self): return the HTTPStatus")
    assert "raiseforstatus" in terms and "status" in terms and "httpstatus" in terms
    assert not {"def", "self", "return", "the", "for"} & set(terms)


def test_path_terms_are_the_directories_and_the_stem_without_extension():
    assert path_terms("httpx/_transports/default.py") == ["httpx", "transport", "default"]
    assert path_terms("tests/models/test_url.py") == ["test", "model", "test", "url", "testurl"]
