"""The retrieval index on disk (adapters/index_db.py) scores as the in-memory index does: the
same floats for the best documents of the code and path fields, after any sequence of files
put, changed and removed, and as another connection to the same file sees it."""

from __future__ import annotations

import random

import pytest

from margin.adapters import index_blocks, index_db, index_writer
from margin.adapters.index_db import CHUNK, PATH_CHUNK, DiskIndex
from margin.core.retrieval import RetrievalIndex
from margin.core.retrieval.ranking import query_terms as _query_terms
from margin.core.workspace_files import Stamp

WORDS = ["parse", "read", "write", "client", "request", "response", "stream", "header", "body", "timeout", "retry", "cache", "token", "encode", "decode", "buffer", "socket", "proxy", "cookie", "redirect", "session"]


def text(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 40)):
        words = rng.choices(WORDS, k=rng.randint(0, 6))
        lines.append(f"    {'_'.join(words[:2]) or 'x'} = {' '.join(words[2:])}  # {rng.choice(WORDS)}Id")
    return "\n".join(lines)


def path(rng: random.Random, n: int) -> str:
    return f"{rng.choice(WORDS)}/{rng.choice(WORDS)}_{n}.py"


def same_scores(disk: DiskIndex, memory: RetrievalIndex, query: str, pool: int) -> None:
    """The disk index's best `pool` are the memory index's best, each with the same float (MaxScore
    makes the memory index exact for its best `pool` only, so only those are compared)."""
    terms = _query_terms(query)
    for on_disk, in_memory in ((disk.content_scores(terms, pool), memory._content.score(terms, pool)),
                               (disk.path_scores(terms, pool), memory._paths.score(terms, pool))):
        names = disk.names_of(on_disk)
        got = {names[doc]: score for doc, score in on_disk.items()}
        want_all = {memory._names[doc]: score for doc, score in in_memory.items()}
        best = sorted(want_all.values(), reverse=True)[:pool]
        want = {name: score for name, score in want_all.items() if best and score >= best[-1]}
        assert got == want, query


@pytest.fixture
def disk(tmp_path):
    index = DiskIndex(tmp_path / "index.db")
    yield index
    index.close()


@pytest.mark.parametrize("chunks", [(CHUNK, PATH_CHUNK), (4, 16)])
@pytest.mark.parametrize("block_bytes", [index_blocks.BLOCK_BYTES, 40])
@pytest.mark.parametrize("seed", range(4))
def test_the_same_scores_as_the_index_in_memory_through_puts_changes_and_removals(disk, seed, block_bytes, chunks,
                                                                                   monkeypatch):
    """Also with blocks of a few keys each: changes then split blocks, empty them and move
    their first keys; and with chunks of a few documents, so that the code's rows and the
    paths' (wider chunks) span many, files are added to chunks that have rows and removed
    from the middle ones."""
    monkeypatch.setattr(index_blocks, "BLOCK_BYTES", block_bytes)
    for module in (index_writer, index_db):
        monkeypatch.setattr(module, "CHUNK", chunks[0])
        monkeypatch.setattr(module, "PATH_CHUNK", chunks[1])
    rng = random.Random(seed)
    memory = RetrievalIndex()
    files = {path(rng, n): text(rng) for n in range(60)}
    for file_id, body in files.items():
        assert disk.put(file_id, body, str(hash(body)), Stamp(len(body), 1)) == memory.put(file_id, body, str(hash(body)))
    queries = [" ".join(rng.choices(WORDS, k=rng.randint(1, 5))) for _ in range(12)] + ["readBody", "nothing"]
    for query in queries:
        same_scores(disk, memory, query, pool=8)
        same_scores(disk, memory, query, pool=200)
    for step in range(40):
        file_id = rng.choice(list(files))
        if step % 3 == 0:
            assert disk.remove(file_id) == memory.remove(file_id)
            files.pop(file_id)
        else:  # saved to disk, or only changed in the editor (this server's overlay)
            files[file_id] = body = text(rng)
            disk.put(file_id, body, str(hash(body)), Stamp(len(body), step) if step % 2 else None)
            memory.put(file_id, body, str(hash(body)))
        same_scores(disk, memory, rng.choice(queries), pool=8)
    assert len(disk) == len(memory) == len(files)
    for file_id in files:
        kept = disk.file_data(file_id)
        assert kept.fingerprint == memory.fingerprint(file_id)
        assert (kept.terms, kept.counts, kept.positions) == (memory._files[file_id].terms, memory._files[file_id].counts,
                                                             memory._files[file_id].positions)
        assert disk.idf(kept.term_list()[0]) == memory._content.idf(kept.term_list()[0]) if kept.terms else True
    blocks = disk.writer.db.execute("SELECT chunk, first, keys FROM blocks ORDER BY chunk, first").fetchall()
    for chunk in {chunk for chunk, _, _ in blocks}:  # each chunk's blocks: its keys in order, each once
        keys = [key for c, first, names in blocks if c == chunk for key in index_blocks.key_list(names)]
        assert keys == sorted(set(keys))
    assert all(first == index_blocks.key_list(names)[0] for _, first, names in blocks)
    assert len(blocks) > (20 if block_bytes < 100 else 0)
    if chunks[0] < 10:  # the paths' chunks (numbered below 0) hold the path keys, the code's the terms
        assert {chunk < 0 for chunk, _, _ in blocks} == {True, False}
        assert all((chunk < 0) == first.startswith("/") for chunk, first, _ in blocks)
        assert len({chunk for chunk, _, _ in blocks if chunk < 0}) >= 3


def test_an_unchanged_file_keeps_its_postings_and_takes_the_new_stamp(disk):
    assert disk.put("a.py", "read_body()\n", "f1", Stamp(12, 1))
    assert not disk.put("a.py", "read_body()\n", "f1", Stamp(12, 2))
    assert disk.stamp("a.py") == Stamp(12, 2)
    assert disk.put("a.py", "write_body()\n", "f2", Stamp(13, 3))
    assert disk.content_scores(["read"], 10) == {}
    assert list(disk.names_of(disk.content_scores(["write"], 10)).values()) == ["a.py"]


def test_a_file_written_twice_in_one_batch_is_indexed_once_as_its_last_text(disk):
    """A batch names each file once in the index: the last of its texts, in one document, and a
    batch of a new file and a changed one writes both."""
    from margin.core.retrieval import filedata

    disk.write([("a.py", filedata.from_text("stream = 1\n", "a"), None)])
    disk.write([("b.py", filedata.from_text("parse_header()\n", "b1"), None),
                ("a.py", filedata.from_text("session = 2\n", "a2"), None),
                ("b.py", filedata.from_text("read_body()\n", "b2"), None)])
    memory = RetrievalIndex()
    memory.put("a.py", "session = 2\n", "a2")
    memory.put("b.py", "read_body()\n", "b2")
    assert sorted(disk.names_of(disk.content_scores(["session", "read", "body"], 10)).values()) == ["a.py", "b.py"]
    assert disk.df("stream") == disk.df("parse") == 0 and disk.df("body") == 1
    same_scores(disk, memory, "session read body stream parse", pool=5)


def test_postings_span_chunks(tmp_path):
    """A term held by files in several chunks is scored across all of them."""
    index = DiskIndex(tmp_path / "index.db")
    memory = RetrievalIndex()
    from margin.core.retrieval import filedata
    bodies = {f"f{n}.py": ("common_term\n" * (1 + n % 3)) + f"rare{n}\n" for n in range(CHUNK + 50)}
    index.write([(name, filedata.from_text(body, name), None) for name, body in bodies.items()])
    for name, body in bodies.items():
        memory.put(name, body, name)
    same_scores(index, memory, "common term rare7", pool=30)
    assert index.df("common") == CHUNK + 50
    index.close()


def test_another_connection_sees_each_commit(tmp_path):
    """Two servers on one workspace share its index file: each reads what the other wrote."""
    first, second = DiskIndex(tmp_path / "index.db"), DiskIndex(tmp_path / "index.db")
    memory = RetrievalIndex()
    try:
        for n in range(5):
            body = f"def handle_request_{n}(timeout):\n    return retry(timeout)\n"
            first.put(f"m{n}.py", body, str(n), Stamp(len(body), n))
            memory.put(f"m{n}.py", body, str(n))
        same_scores(second, memory, "handle request timeout", pool=10)
        second.remove("m0.py")
        memory.remove("m0.py")
        second.put("m1.py", "nothing here\n", "changed", Stamp(13, 9))
        memory.put("m1.py", "nothing here\n", "changed")
        same_scores(first, memory, "handle request timeout", pool=10)
        assert len(first) == len(second) == 4
    finally:
        first.close()
        second.close()


def test_a_file_of_another_format_is_made_anew(tmp_path):
    index = DiskIndex(tmp_path / "index.db")
    index.put("a.py", "read_body()\n", "f1")
    index._db.execute("UPDATE meta SET value = 0 WHERE key = 'format'")
    index.close()
    again = DiskIndex(tmp_path / "index.db")
    assert len(again) == 0 and again.fingerprint("a.py") is None
    again.put("b.py", "write_body()\n", "f2")
    assert list(again.names_of(again.content_scores(["write"], 10)).values()) == ["b.py"]
    again.close()


@pytest.mark.parametrize("seed", range(3))
def test_searches_rank_as_the_index_in_memory_with_git_signals(disk, seed):
    """The same hits, windows and scores as the index in memory, with a history, open files and
    files edited lately (ranking.search over either corpus)."""
    from margin.core.retrieval import Commit, History, Signals

    rng = random.Random(100 + seed)
    memory = RetrievalIndex()
    files = {path(rng, n): text(rng) for n in range(80)}
    for file_id, body in files.items():
        disk.put(file_id, body, str(hash(body)))
        memory.put(file_id, body, str(hash(body)))
    names = list(files)
    history = History([Commit(1_700_000_000 - 3600 * i, tuple(rng.sample(names, rng.randint(1, 4))),
                              " ".join(rng.choices(WORDS, k=4))) for i in range(60)])
    for n in range(10):
        signals = Signals(history, active=tuple(rng.sample(names, 1)), edited=tuple(rng.sample(names, n % 3)))
        query = " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))
        assert disk.search(query, limit=8, signals=signals, exclude=signals.active) == \
            memory.search(query, limit=8, signals=signals, exclude=signals.active)
        assert disk.search(query, limit=8) == memory.search(query, limit=8)


def test_a_query_reads_the_last_commit_while_a_batch_is_being_written(disk):
    """A build's batch is one long transaction: queries meanwhile answer from what had landed
    (their own connection), not wait for it, and see the batch once it commits."""
    from margin.core.retrieval import filedata

    disk.put("a.py", "def read_body():\n    pass\n", "a", Stamp(1, 1))
    with disk.writer.lock, disk.writer.transaction():  # a batch half written
        disk.writer.apply({0: {"stream": {5: 1}}})
        disk.writer.db.execute("INSERT INTO files (doc, file_id, fingerprint, length, path_length, lines) "
                             "VALUES (5, 'b.py', 'b', 1, 1, 1)")
        assert list(disk.names_of(disk.content_scores(["read"], 10)).values()) == ["a.py"]
        assert disk.content_scores(["stream"], 10) == {} and len(disk) == 1
    assert list(disk.names_of(disk.content_scores(["stream"], 10)).values()) == ["b.py"] and len(disk) == 2
    disk.write([("c.py", filedata.from_text("stream()\n", "c"), None)])
    assert sorted(disk.names_of(disk.content_scores(["stream"], 10)).values()) == ["b.py", "c.py"]


def test_an_editors_unsaved_text_stays_with_its_server(tmp_path):
    """Two servers share the file, which holds what is saved: a buffer's text is searched by
    its own server only, until it is saved (then the disk has it) or set back to the disk's."""
    first, second = DiskIndex(tmp_path / "index.db"), DiskIndex(tmp_path / "index.db")
    saved = "def read_body():\n    pass\n"
    try:
        first.put("a.py", saved, "saved", Stamp(len(saved), 1))
        first.put("b.py", "def other():\n    pass\n", "b", Stamp(20, 1))
        assert first.put("a.py", "def stream_reply():\n    pass\n", "typed")  # unsaved
        assert not first.put("a.py", "def stream_reply():\n    pass\n", "typed")
        assert list(first.names_of(first.content_scores(["stream"], 10)).values()) == ["a.py"]
        assert first.content_scores(["read"], 10) == {} and len(first) == 2
        assert second.content_scores(["stream"], 10) == {}
        assert list(second.names_of(second.content_scores(["read"], 10)).values()) == ["a.py"]
        assert first.put("a.py", saved, "saved")  # undone in the editor: the disk's again
        assert not first.overlay.files
        assert list(first.names_of(first.content_scores(["read"], 10)).values()) == ["a.py"]
        first.put("a.py", "def stream_reply():\n    pass\n", "typed")
        first.put("a.py", "def stream_reply():\n    pass\n", "typed", Stamp(27, 2))  # saved
        assert not first.overlay.files
        assert list(second.names_of(second.content_scores(["stream"], 10)).values()) == ["a.py"]
        first.put("new.py", "def brand_new():\n    pass\n", "n")  # a buffer not yet on disk
        assert len(first) == 3 and len(second) == 2
        assert [h.file_id for h in first.search("brand new", limit=1)] == ["new.py"]
        assert first.remove("new.py") and len(first) == 2
    finally:
        first.close()
        second.close()
