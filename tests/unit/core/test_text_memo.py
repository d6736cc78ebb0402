from margin.core.text_memo import TextMemo


def test_texts_are_kept_up_to_the_bound_then_kept_anew():
    memo = TextMemo[int](10)
    memo.put("abcd", 1)
    memo.put("efgh", 2)
    assert (memo.get("abcd"), memo.get("ab" + "cd"), memo.get("efgh")) == (1, 1, 2)  # equal text, another object
    memo.put("ijk", 3)  # 11 characters: what was kept is let go, and keeping begins again
    assert (memo.get("abcd"), memo.get("efgh"), memo.get("ijk")) == (None, None, 3)


def test_a_text_longer_than_the_bound_is_not_kept():
    memo = TextMemo[str](10)
    memo.put("short", "kept")
    memo.put("x" * 11, "too long")
    assert memo.get("x" * 11) is None and memo.get("short") is None
