"""Retrieval quality, by replaying httpx's history: does Margin find the files a commit changed,
given only the commit's subject and the repository as it was just before?

For each of the newest 400 non-merge commits that modify 1–4 `.py` files already present at
the parent (added, deleted and renamed files are ignored; `--no-renames`): the query is the
commit's subject without its trailing pull-request number (`(#1234)`), the index holds the
parent tree's `.py` files (built incrementally: the previous parent's index with only the
changed files `put`), the signals come from `git log` as of the parent (its ancestors only —
nothing from the replayed commit or later), and the gold is the modified `.py` files.

Reported for Margin (`RetrievalIndex.rank_files`), Margin without git signals ("no git": the
text and path alone, as outside a repository) and two baselines computed here on the same
trees: whole-file BM25 with identifiers split (snake_case, camelCase; lowercase, no stemming
or stopwords) and identifier-set Jaccard between the query and each file. recall@k is the mean
over commits of the fraction of gold files in the top k; MRR is the mean reciprocal rank of the
first gold file. Variant "open file": commits with ≥2 gold files, one of them (chosen by the
commit hash) is the active file given to the ranker and excluded; the others must be found.

Tuning: `--tune` grid-searches a few general weights on the older 200 commits only and prints
the best; the figures are then reported on all 400 and on the newer 200 (the hold-out), with
each tuned weight halved and doubled to show how sensitive the result is.

    .venv/bin/python benchmarks/eval_retrieval.py [--bundle PATH] [--commits 400] [--tune] [--memory]

It ranks with the index the server uses, on disk (adapters/index_db.py), written file by file
as the commits are replayed; `--memory`, with the index in memory (the same figures).
"""

from __future__ import annotations

import argparse
import itertools
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "server"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from margin.adapters.index_db import DiskIndex
from margin.core.retrieval import DEFAULT_WEIGHTS, Commit, History, RetrievalIndex, Signals, Weights, ranking
from margin.core.retrieval.bm25 import Field
from margin.core.workspace_files import Stamp
from timing import finish, verdict

TARGETS = {"R@5": 0.72, "R@10": 0.85, "MRR": 0.67}
PR_SUFFIX = re.compile(r"\s*\(#\d+\)")
IDENT = re.compile(r"[A-Za-z0-9_]+")
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


@dataclass
class Replay:
    sha: str
    parent: str
    subject: str
    gold: list[str]


# ---- git ---------------------------------------------------------------------------------------

def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, errors="replace").stdout


class Blobs:
    """Blob texts through one `git cat-file --batch` process."""

    def __init__(self, repo: Path) -> None:
        self.proc = subprocess.Popen(["git", "-C", str(repo), "cat-file", "--batch"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def text(self, blob: str) -> str:
        self.proc.stdin.write(blob.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        data = self.proc.stdout.read(int(header[2]) + 1)[:-1]
        return data.decode("utf-8", "replace")


def read_log(repo: Path):
    """(replayable commits newest first, every non-merge commit as (sha, Commit), the parents of
    every commit)."""
    out = git(repo, "log", "--no-merges", "--no-renames", "--name-status",
              "--format=%x1e%H%x1f%P%x1f%ct%x1f%s")
    replays, history = [], []
    for record in out.split("\x1e")[1:]:
        head, _, rest = record.partition("\n")
        sha, parents, stamp, subject = head.split("\x1f", 3)
        changes = [line.split("\t", 1) for line in rest.splitlines() if "\t" in line]
        history.append((sha, Commit(int(stamp), tuple(p for _, p in changes), subject)))
        gold = sorted(p for s, p in changes if s == "M" and p.endswith(".py"))
        if len(parents.split()) == 1 and 1 <= len(gold) <= 4:
            replays.append(Replay(sha, parents, subject, gold))
    graph = {}
    for line in git(repo, "rev-list", "--parents", "HEAD").splitlines():
        sha, *parents = line.split()
        graph[sha] = parents
    return replays, history, graph


def ancestors(graph: dict[str, list[str]], sha: str) -> set[str]:
    seen, stack = {sha}, [sha]
    while stack:
        for p in graph.get(stack.pop(), ()):
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def py_tree(repo: Path, commit: str) -> dict[str, str]:
    out = git(repo, "ls-tree", "-r", commit)
    tree = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        _, kind, blob = meta.split()
        if kind == "blob" and path.endswith(".py"):
            tree[path] = blob
    return tree


# ---- baselines --------------------------------------------------------------------------------

def plain_terms(text: str) -> list[str]:
    out = []
    for word in IDENT.findall(text):
        for chunk in word.split("_"):
            out.extend(p.lower() for p in CAMEL.findall(chunk))
    return out


class Baselines:
    """Whole-file BM25 and identifier-set Jaccard, kept incrementally like the index."""

    def __init__(self) -> None:
        self.bm25 = Field(k1=1.2, b=0.75)
        self.sets: dict[str, frozenset[str]] = {}
        self.counts: dict[str, Counter] = {}

    def put(self, path: str, text: str) -> None:
        self.remove(path)
        counts = Counter(plain_terms(text))
        self.counts[path] = counts
        self.bm25.add(path, counts)
        self.sets[path] = frozenset(counts)

    def remove(self, path: str) -> None:
        if path in self.counts:
            self.bm25.remove(path, self.counts.pop(path))
            del self.sets[path]

    def rank_bm25(self, query: str) -> list[str]:
        scores = self.bm25.score(list(dict.fromkeys(plain_terms(query))))
        return sorted(scores, key=lambda p: (-scores[p], p))

    def rank_jaccard(self, query: str) -> list[str]:
        q = frozenset(plain_terms(query))
        scores = {p: len(q & s) / len(q | s) for p, s in self.sets.items() if q & s}
        return sorted(scores, key=lambda p: (-scores[p], p))


# ---- metrics ----------------------------------------------------------------------------------

class Scores:
    def __init__(self) -> None:
        self.rows: list[tuple[float, float, float]] = []

    @staticmethod
    def of(rows: list[tuple[float, float, float]]) -> Scores:
        scores = Scores()
        scores.rows = list(rows)
        return scores

    def add(self, ranking: list[str], gold: list[str]) -> None:
        gold_set = set(gold)
        r5 = len(gold_set & set(ranking[:5])) / len(gold_set)
        r10 = len(gold_set & set(ranking[:10])) / len(gold_set)
        rr = next((1 / (i + 1) for i, p in enumerate(ranking) if p in gold_set), 0.0)
        self.rows.append((r5, r10, rr))

    def summary(self, rows: slice = slice(None)) -> dict[str, float]:
        chosen = self.rows[rows]
        n = max(len(chosen), 1)
        return {"R@5": sum(r[0] for r in chosen) / n, "R@10": sum(r[1] for r in chosen) / n,
                "MRR": sum(r[2] for r in chosen) / n, "n": len(chosen)}


def fmt(s: dict[str, float]) -> str:
    return f"R@5 {s['R@5']:.3f}  R@10 {s['R@10']:.3f}  MRR {s['MRR']:.3f}  (n={s['n']})"


def objective(s: dict[str, float]) -> float:
    return s["R@5"] + s["R@10"] + s["MRR"]


# ---- the replay -------------------------------------------------------------------------------

def candidate_weights(tune: bool) -> dict[str, Weights]:
    base = DEFAULT_WEIGHTS
    configs = {"margin": base}
    if tune:
        grid = itertools.product([0.2, 0.3], [0.1, 0.2, 0.3], [1.0, 2.0], [0.5, 1.0], [0.0, 0.5, 1.0])
        for rec, pri, path, subj, fb in grid:
            configs[f"rec={rec} pri={pri} path={path} subj={subj} fb={fb}"] = base.but(
                similarity=0.6, recency=rec, priority=pri, path_weight=path, subject_weight=subj,
                feedback=fb)
    else:
        for name in ("recency", "path_weight", "subject_weight", "priority"):
            value = getattr(base, name)
            for factor in (0.5, 2.0):
                configs[f"{name}×{factor}"] = base.but(**{name: value * factor})
        configs["feedback=0"] = base.but(feedback=0.0)
    return configs


def replay(repo: Path, n_commits: int, tune: bool, disk: Path | None = None) -> None:
    started = time.perf_counter()
    replays, history, graph = read_log(repo)
    chosen = list(reversed(replays[:n_commits]))  # oldest first
    print(f"{len(replays)} replayable commits; replaying the newest {len(chosen)} "
          f"({chosen[0].sha[:8]}…{chosen[-1].sha[:8]})")
    blobs = Blobs(repo)
    index: Any = RetrievalIndex() if disk is None else DiskIndex(disk)
    base = Baselines()

    def rank_files(query: str, signals: Signals | None = None, exclude: tuple[str, ...] = ()) -> list[str]:
        return [s.file_id for s in ranking.score_files(index, ranking.query_terms(query), 10, signals, exclude)]

    configs = candidate_weights(tune)
    solo = {name: Scores() for name in [*configs, "bm25", "jaccard", "no git"]}
    paired = {name: Scores() for name in [*configs, "bm25", "jaccard"]}
    paired_age: list[bool] = []  # per paired row: in the older half?
    tree: dict[str, str] = {}
    puts = 0
    for number, r in enumerate(chosen):
        new_tree = py_tree(repo, r.parent)
        for path in tree.keys() - new_tree.keys():
            index.remove(path)
            base.remove(path)
        for path, blob in new_tree.items():
            if tree.get(path) != blob:
                text = blobs.text(blob)
                index.put(path, text, blob, *((Stamp(len(text), number),) if disk else ()))
                base.put(path, text)
                puts += 1
        tree = new_tree
        before = ancestors(graph, r.parent)
        hist = History([c for sha, c in history if sha in before])
        query = PR_SUFFIX.sub("", r.subject).strip()
        assert all(g in tree for g in r.gold)
        for name, weights in configs.items():
            index.weights = weights
            solo[name].add(rank_files(query, Signals(hist)), r.gold)
        index.weights = configs["margin"]
        solo["no git"].add(rank_files(query), r.gold)
        solo["bm25"].add(base.rank_bm25(query), r.gold)
        solo["jaccard"].add(base.rank_jaccard(query), r.gold)
        if len(r.gold) >= 2:
            active = r.gold[int(r.sha[:8], 16) % len(r.gold)]
            rest = [g for g in r.gold if g != active]
            paired_age.append(number < len(chosen) // 2)
            for name, weights in configs.items():
                index.weights = weights
                paired[name].add(rank_files(query, Signals(hist, active=(active,)), (active,)), rest)
            paired["bm25"].add([p for p in base.rank_bm25(query) if p != active], rest)
            paired["jaccard"].add([p for p in base.rank_jaccard(query) if p != active], rest)
    elapsed = time.perf_counter() - started
    half = len(chosen) // 2
    older, newer = slice(0, half), slice(half, None)
    print(f"replayed {len(chosen)} commits in {elapsed:.1f} s ({puts} file puts, "
          f"{len(configs)} weight settings)")

    if tune:
        older_paired = [i for i, old in enumerate(paired_age) if old]

        def tuned(name: str) -> float:
            p = paired[name]
            return objective(solo[name].summary(older)) + objective(Scores.of(
                [p.rows[i] for i in older_paired]).summary())

        best = max(configs, key=tuned)
        ranked = sorted(configs, key=lambda name: -tuned(name))
        print("\nTuning on the older half (top 10 by R@5+R@10+MRR, query alone + one file open):")
        for name in ranked[:10]:
            print(f"  {name:34} {tuned(name):.3f} older {fmt(solo[name].summary(older))}   "
                  f"newer {fmt(solo[name].summary(newer))}  open {fmt(paired[name].summary())}")
        print(f"best: {best}")
        return

    print(f"\nQuery alone ({len(chosen)} commits; tuned on the older {half}):")
    for label, rows in (("all", slice(None)), ("newer half (hold-out)", newer), ("older half (tuned)", older)):
        print(f"  [{label}]")
        for name in ("margin", "no git", "bm25", "jaccard"):
            print(f"    {name:8} {fmt(solo[name].summary(rows))}")
    s = solo["margin"].summary()
    for key, target in TARGETS.items():
        print(f"  Margin {key} {s[key]:.3f}, target ≥ {target}: {verdict(s[key], target, at_least=True, kind='exact', what=f'{key}')}")
    h = solo["margin"].summary(newer)
    for key, target in TARGETS.items():
        print(f"  Margin {key} on the hold-out {h[key]:.3f}, target ≥ {target}: {verdict(h[key], target, at_least=True, kind='exact', what=f'{key} on the hold-out')}")

    print(f"\nOne changed file open (active, excluded), the others to find ({len(paired_age)} commits):")
    for name in ("margin", "bm25", "jaccard"):
        print(f"    {name:8} {fmt(paired[name].summary())}")
    p = paired["margin"].summary()
    for key, target in TARGETS.items():
        print(f"  Margin {key} {p[key]:.3f}, target ≥ {target}: {verdict(p[key], target, at_least=True, kind='exact', what=f'{key}, one file open')}")

    print("\nSensitivity (all commits; query alone | one file open):")
    for name in configs:
        if name != "margin":
            print(f"    {name:20} {fmt(solo[name].summary())} | {fmt(paired[name].summary())}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", default="/work/shared/data/httpx.bundle")
    parser.add_argument("--repo", help="an existing clone to use instead of cloning the bundle")
    parser.add_argument("--commits", type=int, default=400)
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--memory", action="store_true", help="rank with the index in memory, not on disk")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="margin-eval-") as tmp:
        disk = None if args.memory else Path(tmp) / "index.db"
        if args.repo:
            replay(Path(args.repo), args.commits, args.tune, disk)
            return finish()
        subprocess.run(["git", "-c", "advice.detachedHead=false", "clone", "-q", args.bundle, tmp + "/repo"],
                       check=True)
        replay(Path(tmp) / "repo", args.commits, args.tune, disk)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
