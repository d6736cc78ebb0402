"""The retrieval index: incremental maintenance, export/import, windows, exclusion, the formula."""

from __future__ import annotations

import json
import random
from bisect import bisect_left

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.retrieval import index as index_module
from margin.core.retrieval.filedata import from_text
from margin.core.retrieval.index import _K1, WINDOW_LINES, WINDOW_STRIDE, RetrievalIndex
from margin.core.retrieval.rank import DEFAULT_WEIGHTS, FACT_TYPE, combine
from margin.core.retrieval.signals import Commit, History, Signals

FILES = {
    "pkg/client.py": "class Client:\n    def send(self, request):\n        return self.transport.handle(request)\n",
    "pkg/cookies.py": "class Cookies:\n    def set_cookie(self, name, value):\n        self.jar[name] = value\n",
    "pkg/redirects.py": "def follow_redirects(response):\n    location = response.headers['location']\n",
    "tests/test_client.py": "def test_send():\n    client = Client()\n    client.send(request)\n",
}


def build(files=FILES) -> RetrievalIndex:
    index = RetrievalIndex()
    for path, text in files.items():
        index.put(path, text, f"fp:{text}")
    return index


def test_put_is_a_no_op_when_the_fingerprint_is_unchanged():
    index = build()
    assert index.put("pkg/client.py", "something else entirely", f"fp:{FILES['pkg/client.py']}") is False
    assert index.rank_files("cookie")[0][0] == "pkg/cookies.py"
    assert index.put("pkg/client.py", "cookie cookie cookie", "fp:new") is True
    assert index.fingerprint("pkg/client.py") == "fp:new"


def test_remove_and_membership():
    index = build()
    assert len(index) == 4 and "pkg/cookies.py" in index
    assert index.remove("pkg/cookies.py") is True
    assert index.remove("pkg/cookies.py") is False
    assert "pkg/cookies.py" not in index and index.fingerprint("pkg/cookies.py") is None
    assert all(f != "pkg/cookies.py" for f, _ in index.rank_files("cookie jar"))


def test_path_terms_find_a_file_by_its_name():
    assert build().rank_files("redirects")[0][0] == "pkg/redirects.py"


def test_export_import_round_trip_equals_the_original():
    index = build()
    reloaded = RetrievalIndex()
    for path in index.files():
        assert reloaded.import_file(path, index.fingerprint(path), index.export_file(path)) is True
    for path in index.files():
        assert reloaded.export_file(path) == index.export_file(path)
        assert reloaded.fingerprint(path) == index.fingerprint(path)
    for query in ("send request", "cookie value", "redirect location", "client"):
        assert reloaded.search(query) == index.search(query)
        assert reloaded.rank_files(query) == index.rank_files(query)


def test_export_survives_json_and_is_compact():
    index = build()
    reloaded = RetrievalIndex()
    for path in index.files():
        stored = json.loads(json.dumps(index.export_file(path)))
        assert stored["v"] == index_module.EXPORT_VERSION == 2
        assert reloaded.import_file(path, index.fingerprint(path), stored) is True
    for query in ("send request", "cookie value", "redirect location"):
        assert reloaded.search(query) == index.search(query)


def test_import_refuses_another_format_version():
    assert RetrievalIndex().import_file("a.py", "fp", {"v": -1, "lines": 1, "masks": {}}) is False
    # Version 1 (a hex bit mask of lines per term): refused, so the server re-reads the file.
    index = build()
    before = index.search("cookie")
    assert index.import_file("pkg/cookies.py", "fp:v1", {"v": 1, "lines": 3, "masks": {"cookie": "3"}}) is False
    assert index.fingerprint("pkg/cookies.py") == f"fp:{FILES['pkg/cookies.py']}"
    assert index.search("cookie") == before


def test_import_refuses_damaged_data_and_changes_nothing():
    index = build()
    good = index.export_file("pkg/cookies.py")
    damaged = [{**good, "tf": "not base64!"}, {**good, "at": good["at"][:-4]},
               {**good, "terms": good["terms"] + " extra"}, {**good, "lines": "many"},
               {k: v for k, v in good.items() if k != "terms"}, "not a mapping"]
    before = [index.rank_files(q) for q in ("cookie", "send", "redirect")]
    for data in damaged:
        assert index.import_file("pkg/cookies.py", "fp:bad", data) is False
        assert index.import_file("new.py", "fp:bad", data) is False
    assert "new.py" not in index and len(index) == 4
    assert [index.rank_files(q) for q in ("cookie", "send", "redirect")] == before


def test_files_past_65536_lines_round_trip():
    lines = ["x = 1"] * 70_000
    lines[3] = lines[69_990] = "needle = compute_needle()"
    index = RetrievalIndex()
    index.put("huge.py", "\n".join(lines), "fp")
    assert index._files["huge.py"].positions.itemsize == 4  # line numbers past 65535
    reloaded = RetrievalIndex()
    assert reloaded.import_file("huge.py", "fp", json.loads(json.dumps(index.export_file("huge.py"))))
    for each in (index, reloaded):
        hits = each.search("needle", per_file=2)
        assert sorted(h.start_line <= 69_990 < h.end_line or h.start_line <= 3 < h.end_line for h in hits) == [True, True]
    assert reloaded.search("needle") == index.search("needle")


def test_file_numbers_are_reused():
    index = RetrievalIndex()
    for n in range(50):
        index.put(f"f{n % 3}.py", f"word_{n} = {n}", f"fp{n}")
        if n % 5 == 0:
            index.remove(f"f{(n + 1) % 3}.py")
    assert len(index._names) <= 3
    assert index.rank_files("word 49")[0][0] == "f1.py"


def test_excluded_files_are_never_returned_but_still_count_as_context():
    index = build()
    history = History([Commit(2, ("pkg/client.py", "tests/test_client.py"), "Send requests")])
    signals = Signals(history, active=("pkg/client.py",))
    hits = index.search("send request client", signals=signals, exclude=("pkg/client.py",))
    assert hits and all(h.file_id != "pkg/client.py" for h in hits)
    ranked = index.score_files("send request client", signals=signals, exclude=("pkg/client.py",))
    assert ranked[0].file_id == "tests/test_client.py" and ranked[0].priority == 1.0


def test_windows_cover_the_matching_lines():
    lines = [f"filler_{i} = {i}" for i in range(200)]
    lines[150] = "needle_value = compute_needle()"
    index = RetrievalIndex()
    index.put("big.py", "\n".join(lines), "fp")
    hit = index.search("needle")[0]
    assert hit.file_id == "big.py"
    assert hit.start_line <= 150 < hit.end_line
    assert hit.end_line - hit.start_line == WINDOW_LINES
    short = RetrievalIndex()
    short.put("short.py", "needle = 1\nother = 2", "fp")
    assert [(h.start_line, h.end_line) for h in short.search("needle")] == [(0, 2)]


def test_two_windows_of_one_file_do_not_overlap():
    lines = [f"filler_{i} = {i}" for i in range(300)]
    lines[20] = lines[250] = "needle = 1"
    index = RetrievalIndex()
    index.put("big.py", "\n".join(lines), "fp")
    a, b = index.search("needle", per_file=2)
    assert a.end_line <= b.start_line or b.end_line <= a.start_line
    assert {20, 250} == {n for h in (a, b) for n in (20, 250) if h.start_line <= n < h.end_line}


def test_the_score_is_the_formula_of_its_components():
    index = build()
    history = History([Commit(3, ("pkg/cookies.py",), "Cookie fixes"),
                       Commit(2, ("pkg/client.py", "pkg/redirects.py"), "Redirects")])
    signals = Signals(history, active=("pkg/client.py",), edited=("tests/test_client.py",))
    ranked = index.score_files("cookie send redirect", limit=10, signals=signals)
    assert max(s.similarity for s in ranked) == 1.0
    by_file = {s.file_id: s for s in ranked}
    assert by_file["tests/test_client.py"].priority == 1.0  # edited
    assert by_file["pkg/redirects.py"].priority == 1.0  # changed with the active file
    assert by_file["pkg/cookies.py"].priority == 0.0 and by_file["pkg/cookies.py"].recency == 1.0
    for s in ranked:
        assert s.type == FACT_TYPE
        assert abs(s.score - combine(DEFAULT_WEIGHTS, s.similarity, s.priority, s.recency)) < 1e-12
    assert [s.score for s in ranked] == sorted((s.score for s in ranked), reverse=True)
    for hit in index.search("cookie send redirect", signals=signals):
        assert abs(hit.score - combine(DEFAULT_WEIGHTS, hit.similarity, hit.priority, hit.recency)) < 1e-12


WORDS = ["alpha", "beta", "gamma_delta", "epsilonZeta", "eta", "theta", "iota", "kappa"]
texts = st.lists(st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join), min_size=1, max_size=40).map("\n".join)
names = st.sampled_from([f"d{i % 3}/f{i}.py" for i in range(8)])
operations = st.lists(st.one_of(st.tuples(st.just("put"), names, texts), st.tuples(st.just("remove"), names)),
                      max_size=30)
QUERIES = ["alpha beta", "gamma delta eta", "epsilon zeta theta", "kappa iota alpha beta eta", "d1 f3"]


@settings(max_examples=150, deadline=None)
@given(operations)
def test_an_index_built_incrementally_ranks_exactly_as_one_built_fresh(ops):
    original_pool = index_module.CANDIDATE_POOL
    index_module.CANDIDATE_POOL = 1  # exercise the pruning on tiny indexes too
    try:
        incremental = RetrievalIndex()
        final: dict[str, str] = {}
        for op in ops:
            if op[0] == "put":
                incremental.put(op[1], op[2], f"fp:{op[2]}")
                final[op[1]] = op[2]
            else:
                incremental.remove(op[1])
                final.pop(op[1], None)
        fresh = build(dict(sorted(final.items(), reverse=True)))
        assert sorted(incremental.files()) == sorted(final)
        for query in QUERIES:
            for limit in (1, 3, 10):
                assert incremental.rank_files(query, limit=limit) == fresh.rank_files(query, limit=limit)
            assert incremental.search(query) == fresh.search(query)
    finally:
        index_module.CANDIDATE_POOL = original_pool


def test_each_signal_decides_the_order_when_the_text_ties():
    """Two files with the same text: without signals the tie stays as it is; an edit (priority)
    or a recent change (recency) puts the other first. A weight of 0 for either fails here."""
    text = "def settle(amount):\n    return round(amount * 2, 2)\n"

    def ranked(signals: Signals) -> list[str]:
        index = RetrievalIndex()
        index.put("a_plain.py", text, "fp1")
        index.put("b_signal.py", text, "fp2")
        return [s.file_id for s in index.score_files("settle amount round", limit=2, signals=signals)]

    assert ranked(Signals(None, (), ())) == ["a_plain.py", "b_signal.py"]
    assert ranked(Signals(None, (), ("b_signal.py",))) == ["b_signal.py", "a_plain.py"]  # priority
    recent = History([Commit(2, ("b_signal.py",), ""), Commit(1, ("README.md",), "")])
    assert ranked(Signals(recent, (), ())) == ["b_signal.py", "a_plain.py"]  # recency


def _best_windows_per_window(entry, idf, per_file):
    """`_best_windows` as it was before #24 (two bisects a term in every window): the reference."""
    layout = entry.layout()
    found = [(entry.line_numbers(layout, t), weight) for t, weight in idf.items() if weight > 0]
    holding = [(numbers, weight) for numbers, weight in found if numbers is not None]
    lines = entry.lines
    last = max(lines - WINDOW_LINES, 0)
    starts = list(range(0, last + 1, WINDOW_STRIDE))
    if starts[-1] != last:
        starts.append(last)
    scored = []
    for start in starts:
        end = start + WINDOW_LINES
        score = 0.0
        for numbers, weight in holding:
            tf = bisect_left(numbers, end) - bisect_left(numbers, start)
            if tf:
                score += weight * tf * (_K1 + 1) / (tf + _K1)
        scored.append((score, -start))
    scored.sort(reverse=True)
    chosen = []
    for score, neg_start in scored:
        start = -neg_start
        if all(start >= e or start + WINDOW_LINES <= s for s, e, _ in chosen):
            chosen.append((start, min(start + WINDOW_LINES, lines), score))
            if len(chosen) == per_file or score == 0.0:
                break
    return chosen


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**6), lines=st.integers(1, 900), per_file=st.integers(1, 3))
def test_best_windows_are_exactly_those_of_scoring_every_window(seed, lines, per_file):
    """Request overhead (#24): each term's lines are counted by stride-long run and a window
    adds its runs; the windows and their scores are bit for bit those of two bisects a term in
    every window."""
    rng = random.Random(seed)
    vocabulary = [f"word{i}" for i in range(40)]
    frequent = rng.sample(vocabulary, 3)
    text = "\n".join(" ".join(rng.choice(frequent) if rng.random() < 0.5 else rng.choice(vocabulary)
                              for _ in range(rng.randint(0, 3))) if rng.random() < 0.8 else ""
                     for _ in range(lines))
    entry = from_text(text, "sha256:x")
    idf = {term: rng.choice([0.0, rng.uniform(0.01, 9.0)]) for term in rng.sample(vocabulary, 8)}
    assert RetrievalIndex._best_windows(entry, idf, per_file) == _best_windows_per_window(entry, idf, per_file)
    # Searched again, with the file's term list and offsets kept from the first time.
    assert RetrievalIndex._best_windows(entry, idf, per_file) == _best_windows_per_window(entry, idf, per_file)


@pytest.mark.parametrize("seed", range(8))
def test_names_are_looked_up_only_for_candidates_within_reach_and_the_ranking_is_that_of_all(seed, monkeypatch):
    """score_files looks up the names of the candidates whose score can reach the best `limit`
    (their recency is what needs the name): the same files, in the same order with the same
    scores, as scoring every candidate — with recency deciding, ties, excluded files among the
    best, and fewer candidates than `limit`."""
    from margin.core.retrieval import ranking

    rng = random.Random(seed)
    words = ["parse", "read", "body", "client", "stream", "header", "cookie", "retry", "token", "proxy"]
    files = {f"pkg{n % 7}/{rng.choice(words)}_{n}.py": "\n".join(
        " ".join(rng.choices(words, k=rng.randint(1, 5))) for _ in range(rng.randint(1, 12))) for n in range(150)}
    index = RetrievalIndex()
    for name, body in files.items():
        index.put(name, body, name)
    names = list(files)
    history = History([Commit(1_700_000_000 - 3600 * i, tuple(rng.sample(names, rng.randint(1, 3))),
                              " ".join(rng.choices(words, k=3))) for i in range(80)])
    looked_up: list[int] = []
    real = index.names_of

    def names_of(docs):
        docs = list(docs)
        looked_up.append(len(docs))
        return real(docs)

    monkeypatch.setattr(index, "names_of", names_of)
    everything = ranking._within_reach
    pruned = 0
    for n in range(30):
        signals = Signals(history, active=tuple(rng.sample(names, 1 + n % 2)), edited=tuple(rng.sample(names, n % 3)))
        query = " ".join(rng.choices(words, k=rng.randint(1, 4)))
        for limit in (1, 4, 8, 400):
            looked_up.clear()
            got = ranking.score_files(index, ranking.query_terms(query), limit, signals, signals.active)
            reached = looked_up[-1]
            monkeypatch.setattr(ranking, "_within_reach", lambda known, *_: list(known))
            looked_up.clear()
            want = ranking.score_files(index, ranking.query_terms(query), limit, signals, signals.active)
            monkeypatch.setattr(ranking, "_within_reach", everything)
            assert got == want, (query, limit)
            pruned += looked_up[-1] - reached
    assert pruned > 0  # names were spared
