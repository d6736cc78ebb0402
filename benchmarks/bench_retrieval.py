"""Workspace retrieval speed (`margin.core.retrieval`): building the index, a query, updating one
changed file, and reloading a stored index, on a generated 10,000-file workspace and on httpx.

Targets:
- query (`search`, 8 hits, with git signals and an open file): median <= 20 ms over 50 varied
  queries on a 10,000-file workspace;
- incremental update of one changed ~1,000-line file (`put` with a new fingerprint): median
  <= 50 ms on the 10,000-file index;
- reloading every file from its stored form (`json.loads` of each file's stored JSON +
  `import_file`) <= 1/4 of building the index with `put` from the texts (both timed side by
  side, twice, medians);
- memory of one index of the 10,000-file workspace <= 350 MB, the larger of two measures: the
  growth of the process's resident size (VmRSS, after `gc.collect()`) while building it (this
  includes the allocator's fragmentation and the tokeniser's word cache, but can understate if
  the allocator reuses memory freed earlier), and the sum of `sys.getsizeof` over every object
  reachable from the index (exact for the objects, without allocator overhead);
- its store, as the server writes it (`adapters/index_file.py`: one JSON document of every
  file's `export_file` with its size, mtime and fingerprint, gzipped at level 3) <= 40 MB.

The generated workspace is deterministic (seeded RNG): 10,000 Python-like files whose sizes
follow a log-normal law (mean ~150 lines, a few thousand-line files), under nested package
directories, written from a vocabulary of ~200 common programming words combined into
snake_case and CamelCase identifiers (Zipf-distributed), a per-package topic vocabulary and
rare per-file words, with docstrings and comments in the same words; a synthetic history of
2,000 commits of 1–6 files each gives the git signals. Queries mix identifiers, prose and
common words (the slow case: long posting lists). The httpx figures use its `.py` files at the
newest commit of /work/shared/data/httpx.bundle (cloned to a temporary directory) with its real
`git log`, querying with its last 50 commit subjects.

    .venv/bin/python benchmarks/bench_retrieval.py [--files 10000] [--bundle PATH] [--disk]

`--disk` measures the index on disk (adapters/index_db.py, #26: not yet the one the server
uses) beside the one in memory, on the generated workspace: its build (files written in
chunk-sized batches, as a rebuild writes them), its file's size, a query's median and worst
time with the same signals, the same update, the process's growth while it answers, and how
often its hits are the in-memory index's (the same on any workspace of at most CANDIDATE_POOL
files; past that the in-memory index also ranks documents its MaxScore pruning scored in part).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "server"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from margin.core.retrieval import GIT_LOG_ARGS, Commit, History, RetrievalIndex, Signals, parse_git_log
from margin.core.retrieval.ranking import CANDIDATE_POOL
from timing import finish, interleaved, verdict

QUERY_MS, UPDATE_MS, RELOAD_RATIO, INDEX_MB, STORE_MB = 20.0, 50.0, 0.25, 350.0, 40.0

WORDS = ["request", "response", "client", "server", "connection", "session", "header", "body", "content", "stream", "buffer", "chunk", "read", "write", "open", "close", "send", "receive", "parse", "encode", "decode", "format", "render", "load", "save", "store", "cache", "key", "value", "item", "entry", "record", "table", "row", "column", "index", "query", "filter", "sort", "group", "merge", "split", "join", "user", "account", "token", "auth", "password", "login", "logout", "permission", "role", "policy", "config", "setting", "option", "default", "timeout", "retry", "backoff", "limit", "rate", "quota", "error", "exception", "warning", "message", "log", "logger", "event", "handler", "callback", "hook", "listener", "signal", "queue", "task", "job", "worker", "pool", "thread", "process", "lock", "file", "path", "directory", "name", "size", "length", "count", "total", "offset", "position", "line", "text", "string", "bytes", "number", "integer", "float", "list", "dict", "set", "tuple", "map", "array", "node", "tree", "graph", "edge", "vertex", "parent", "child", "root", "leaf", "level", "depth", "width", "height", "color", "style", "theme", "layout", "view", "model", "controller", "template", "page", "route", "url", "host", "port", "scheme", "proxy", "socket", "packet", "frame", "protocol", "version", "status", "code", "state", "start", "stop", "run", "execute", "call", "invoke", "apply", "update", "delete", "create", "insert", "remove", "add", "get", "put", "post", "patch", "fetch", "pull", "push", "sync", "async", "await", "future", "promise", "result", "output", "input", "source", "target", "build", "compile", "test", "check", "validate", "verify", "assert", "match", "compare", "equal", "hash", "digest", "sign", "encrypt", "decrypt", "compress", "expand", "resolve", "register", "lookup", "find", "search", "scan", "walk", "visit", "transform", "convert"]
PROSE = ["the", "a", "of", "to", "in", "is", "for", "and", "with", "that", "this", "when", "it", "be", "on", "by", "not", "or", "from"]


class Workspace:
    """The generated files, their texts and a synthetic commit history, all from one seed."""

    def __init__(self, files: int, seed: int = 1234) -> None:
        rng = random.Random(seed)
        self.rng = rng
        weights = [1 / (i + 1) for i in range(len(WORDS))]
        self.common = rng.choices(WORDS, weights, k=200_000)
        self.texts: dict[str, str] = {}
        packages = [self.package_path(rng) for _ in range(max(files // 40, 1))]
        topics = {p: rng.sample(WORDS, 12) + [self.rare(rng) for _ in range(6)] for p in packages}
        for n in range(files):
            package = packages[n % len(packages)]
            name = f"{package}/{'_'.join(rng.sample(topics[package][:12], rng.randint(1, 2)))}_{n}.py"
            lines = min(max(int(rng.lognormvariate(4.6, 0.9)), 8), 4000)
            self.texts[name] = self.file_text(rng, lines, topics[package] + [self.rare(rng) for _ in range(8)])
        paths = list(self.texts)
        self.commits = [Commit(1_700_000_000 - 3600 * i, tuple(rng.sample(paths, rng.randint(1, 6))),
                               " ".join(self.words(rng, rng.randint(3, 8), topics[packages[i % len(packages)]])))
                        for i in range(2000)]

    @staticmethod
    def package_path(rng: random.Random) -> str:
        return "/".join(rng.sample(WORDS, rng.randint(1, 3)))

    @staticmethod
    def rare(rng: random.Random) -> str:
        return "".join(rng.choice("bcdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))

    def words(self, rng: random.Random, n: int, topic: list[str]) -> list[str]:
        return [rng.choice(topic) if rng.random() < 0.35 else self.common[rng.randrange(len(self.common))]
                for _ in range(n)]

    def ident(self, rng: random.Random, topic: list[str], camel: bool = False) -> str:
        parts = self.words(rng, rng.choice((1, 2, 2, 3)), topic)
        return "".join(p.title() for p in parts) if camel else "_".join(parts)

    def file_text(self, rng: random.Random, lines: int, topic: list[str]) -> str:
        out = [f"from {self.ident(rng, topic)} import {self.ident(rng, topic, True)}", ""]
        while len(out) < lines:
            kind = rng.random()
            if kind < 0.08:
                out += ["", f"class {self.ident(rng, topic, True)}({self.ident(rng, topic, True)}):",
                        f'    """{" ".join(self.words(rng, 8, topic)).capitalize()}."""']
            elif kind < 0.25:
                args = ", ".join(self.ident(rng, topic) for _ in range(rng.randint(0, 3)))
                out += ["", f"    def {self.ident(rng, topic)}(self{', ' if args else ''}{args}):"]
            elif kind < 0.35:
                out.append(f"        # {' '.join(self.words(rng, 4, topic) + rng.sample(PROSE, 3))}")
            elif kind < 0.5:
                out.append(f"        if {self.ident(rng, topic)} is None:")
                out.append(f"            return {self.ident(rng, topic)}")
            else:
                out.append(f"        {self.ident(rng, topic)} = self.{self.ident(rng, topic)}"
                           f"({self.ident(rng, topic)}, {rng.randint(0, 99)})")
        return "\n".join(out[:lines]) + "\n"

    def queries(self, n: int) -> list[str]:
        rng = random.Random(99)
        out = []
        for i in range(n):
            topic = rng.sample(WORDS, 5)
            if i % 3 == 0:
                out.append(f"how does {self.ident(rng, topic)} handle the {' '.join(self.words(rng, 3, topic))}")
            elif i % 3 == 1:
                out.append(f"fix {self.ident(rng, topic, True)}.{self.ident(rng, topic)} when {self.ident(rng, topic)} is empty")
            else:
                out.append(" ".join(self.words(rng, rng.randint(4, 10), topic)))
        return out


def median_ms(runs: list[float]) -> float:
    return statistics.median(runs) * 1000


def measure(label: str, texts: dict[str, str], commits: list[Commit], queries: list[str],
            changed: str, edits: int = 15) -> tuple[RetrievalIndex, Signals]:
    print(f"\n{label}: {len(texts):,} files, {sum(t.count(chr(10)) for t in texts.values()):,} lines")
    gc.collect()
    rss_before = rss_mb()
    index = RetrievalIndex()
    started = time.perf_counter()
    for path, text in texts.items():
        index.put(path, text, str(hash(text)))
    build = time.perf_counter() - started
    print(f"  build (put every file): {build:.2f} s")
    gc.collect()
    grown, objects = rss_mb() - rss_before, deep_size(index) / 1e6
    resident = max(grown, objects)
    print(f"  memory of the index: {grown:.0f} MB resident growth while building it, {objects:.0f} MB of "
          f"objects reachable from it; target <= {INDEX_MB:.0f} MB: {verdict(resident, INDEX_MB, kind='exact', what=f'{label}: index size')}")

    history = History(commits)
    started = time.perf_counter()
    History(commits)
    print(f"  History from {len(commits):,} commits: {(time.perf_counter() - started) * 1000:.1f} ms")
    active = max(history.recency, key=history.recency.get) if history.recency else None
    signals = Signals(history, active=(active,) if active else ())
    search_times, rank_times, plain_times = [], [], []
    for query in queries:
        started = time.perf_counter()
        index.search(query, limit=8, signals=signals, exclude=signals.active)
        search_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        index.rank_files(query, limit=10, signals=signals)
        rank_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        index.search(query, limit=8)
        plain_times.append(time.perf_counter() - started)
    q = median_ms(search_times)
    print(f"  query, search() with signals, median of {len(queries)}: {q:.2f} ms "
          f"(max {max(search_times) * 1000:.1f} ms; rank_files {median_ms(rank_times):.2f} ms; "
          f"without signals {median_ms(plain_times):.2f} ms), target <= {QUERY_MS:.0f} ms: "
          f"{verdict(q, QUERY_MS, kind='time', what=f'{label}: query')}")

    text = texts[changed]
    lines = text.split("\n")
    update_times = []
    for n in range(edits):
        lines[n * 7 % len(lines)] += f"  # edit {n}"
        new = "\n".join(lines)
        started = time.perf_counter()
        index.put(changed, new, f"edit-{n}")
        update_times.append(time.perf_counter() - started)
    u = median_ms(update_times)
    print(f"  update one changed file ({changed}, {len(lines):,} lines), median of {edits}: {u:.2f} ms, "
          f"target <= {UPDATE_MS:.0f} ms: {verdict(u, UPDATE_MS, kind='time', what=f'{label}: update')}")
    index.put(changed, text, str(hash(text)))

    stored = {path: (index.fingerprint(path), json.dumps(index.export_file(path))) for path in texts}
    size = sum(len(data) for _, data in stored.values())
    store = gzip.compress(json.dumps({"version": 1, "folder": "file:///workspace", "files": {
        path: {"size": len(texts[path]), "mtime_ns": 1_700_000_000_000_000_000 + n,
               "fingerprint": index.fingerprint(path), "data": index.export_file(path)}
        for n, path in enumerate(texts)}}).encode(), compresslevel=3)
    print(f"  stored index, gzipped as the server writes it: {len(store) / 1e6:.1f} MB "
          f"({size / 1e6:.1f} MB of JSON before gzip), target <= {STORE_MB:.0f} MB: "
          f"{verdict(len(store) / 1e6, STORE_MB, kind='exact', what=f'{label}: stored size')}")
    del store

    def build_all() -> RetrievalIndex:
        fresh = RetrievalIndex()
        for path, text in texts.items():
            fresh.put(path, text, str(hash(text)))
        return fresh

    def reload_all() -> RetrievalIndex:
        fresh = RetrievalIndex()
        for path, (fingerprint, data) in stored.items():
            fresh.import_file(path, fingerprint, json.loads(data))
        return fresh

    times = interleaved(2, build=build_all, reload=reload_all)
    reloaded = reload_all()
    same = all(reloaded.rank_files(qq, limit=10) == index.rank_files(qq, limit=10) for qq in queries[:10])
    ratio = times["reload"] / times["build"]
    print(f"  reload from stored form ({size / 1e6:.1f} MB of JSON): {times['reload']:.2f} s against "
          f"{times['build']:.2f} s to build (side by side, median of 2) = {ratio:.2f}x, target <= "
          f"{RELOAD_RATIO}x: {verdict(ratio, RELOAD_RATIO, what=f'{label}: reload against build')}; same rankings as the built index: {same}")
    print(f"  process memory after: {peak_rss_mb():.0f} MB peak RSS")
    return index, signals


def measure_disk(texts: dict[str, str], queries: list[str], changed: str, memory: RetrievalIndex,
                 signals: Signals) -> None:
    """The index on disk beside the one in memory (`--disk`)."""
    from margin.adapters.index_db import CHUNK, DiskIndex
    from margin.core.retrieval import filedata

    with tempfile.TemporaryDirectory(prefix="margin-bench-disk-") as tmp:
        path = Path(tmp) / "index.db"
        index, batch, started = DiskIndex(path), [], time.perf_counter()
        for file_id, text in texts.items():
            batch.append((file_id, filedata.from_text(text, str(hash(text))), None))
            if len(batch) == CHUNK:
                index.write(batch)
                batch = []
        index.write(batch)
        build = time.perf_counter() - started
        index.close()
        stored = sum(f.stat().st_size for f in Path(tmp).iterdir()) / 1e6
        print(f"  on disk: build {build:.1f} s of one core, {stored:.0f} MB on disk")
        gc.collect()
        before = rss_mb()
        index = DiskIndex(path)
        times, same = [], 0
        for query in queries:
            started = time.perf_counter()
            hits = index.search(query, limit=8, signals=signals, exclude=signals.active)
            times.append(time.perf_counter() - started)
            same += hits == memory.search(query, limit=8, signals=signals, exclude=signals.active)
        gc.collect()
        q = median_ms(times[1:])
        print(f"  on disk: query, search() with signals, median of {len(queries) - 1} after the first: {q:.2f} ms "
              f"(max {max(times[1:]) * 1000:.1f} ms; the first, reading every file's length, "
              f"{times[0] * 1000:.1f} ms), target <= {QUERY_MS:.0f} ms: {verdict(q, QUERY_MS, kind='time', what='disk: query')}; "
              f"the same hits as the memory index on {same} of {len(queries)} (it also ranks the documents its pruning "
              f"scored in part outside the best {CANDIDATE_POOL}; this one, only the best); the process grew "
              f"{rss_mb() - before:.0f} MB")
        lines, update = texts[changed].split("\n"), []
        for n in range(15):
            lines[n * 7 % len(lines)] += f"  # edit {n}"
            started = time.perf_counter()
            index.put(changed, "\n".join(lines), f"edit-{n}")
            update.append(time.perf_counter() - started)
        u = median_ms(update)
        print(f"  on disk: update one changed file ({len(lines):,} lines), median of 15: {u:.2f} ms, target <= "
              f"{UPDATE_MS:.0f} ms: {verdict(u, UPDATE_MS, kind='time', what='disk: update')}")
        index.close()


def rss_mb() -> float:
    """The process's resident size now (Linux: /proc/self/status)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def deep_size(root: object) -> int:
    """`sys.getsizeof` summed over every object reachable from `root`, each counted once
    (classes, functions and modules excluded)."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
        if isinstance(obj, dict):  # a dict with str keys reports only its values as referents
            stack.extend(obj)
    return total


def peak_rss_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def httpx_tree(bundle: str, tmp: str) -> tuple[dict[str, str], list[Commit], list[str]]:
    repo = Path(tmp) / "httpx"
    subprocess.run(["git", "-c", "advice.detachedHead=false", "clone", "-q", bundle, str(repo)], check=True)
    files = subprocess.run(["git", "-C", str(repo), "ls-files", "*.py"], check=True,
                           capture_output=True, text=True).stdout.split()
    texts = {f: (repo / f).read_text(errors="replace") for f in files}
    log = subprocess.run(["git", "-C", str(repo), *GIT_LOG_ARGS], check=True, capture_output=True,
                         text=True).stdout
    commits = parse_git_log(log)
    return texts, commits, [c.subject for c in commits[:50]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--bundle", default="/work/shared/data/httpx.bundle")
    parser.add_argument("--disk", action="store_true", help="the index on disk beside the one in memory")
    args = parser.parse_args()
    started = time.perf_counter()
    workspace = Workspace(args.files)
    print(f"generated {len(workspace.texts):,} files in {time.perf_counter() - started:.1f} s")
    big = min((p for p, t in workspace.texts.items() if t.count("\n") >= 1000),
              key=lambda p: workspace.texts[p].count("\n"))
    index, signals = measure("Generated workspace", workspace.texts, workspace.commits, workspace.queries(50), big)
    if args.disk:
        measure_disk(workspace.texts, workspace.queries(50), big, index, signals)
    del index
    with tempfile.TemporaryDirectory(prefix="margin-bench-") as tmp:
        texts, commits, queries = httpx_tree(args.bundle, tmp)
        measure("httpx (newest commit, .py files)", texts, commits, queries,
                max(texts, key=lambda p: texts[p].count("\n")))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
