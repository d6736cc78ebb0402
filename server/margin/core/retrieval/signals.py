"""Signals beside the text: the workspace's git history and the editor's open and edited files.

Inputs, all obtainable in the server:

- `commits`: `parse_git_log(stdout)` of
  `git log --no-merges --no-renames --name-only --format=%x1e%ct%x1f%s -n 2000`
  (`GIT_LOG_ARGS`) run in the workspace root: newest first, each a `Commit(timestamp, paths,
  subject)`, paths relative to the repository root (the same form as the index's file ids; a
  path that is no longer in the index is simply never ranked). Build one `History` from them
  whenever HEAD moves and reuse it for every query.
- `active`: the file the user is in (and any other open files), as file ids;
- `edited`: files edited in the editor since the last commit (or recently), newest first.

`History` turns the commits into three per-file signals:

- `recency`: how much a file has been changed lately — the sum over the commits touching it of
  `0.5 ** (k / half_life)`, `k` being the commit's rank (0 = newest), each commit weighted
  `1 / files_in_commit ** 0.5` so a sweeping reformat counts little; normalised so the
  highest file has 1. Commit ranks rather than wall-clock ages: a quiet month does not make
  every file stale.
- `cochange(files)`: how often a file changed together with the given files (the same
  decay and commit weights; commits touching more than `max_commit_files` files are skipped),
  normalised to a maximum of 1;
- `subjects`: a BM25 field over the subjects of the commits that touched each file — what the
  project has called the work done in that file, which often names it better than its code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from margin.core.retrieval.bm25 import Field
from margin.core.retrieval.terms import text_terms

GIT_LOG_ARGS = ("log", "--no-merges", "--no-renames", "--name-only", "--format=%x1e%ct%x1f%s",
                "-n", "2000")
"""The `git` arguments whose output `parse_git_log` reads (run in the repository root)."""


@dataclass(frozen=True, slots=True)
class Commit:
    timestamp: int
    paths: tuple[str, ...]
    subject: str = ""


def parse_git_log(text: str) -> list[Commit]:
    """Commits from the output of `git GIT_LOG_ARGS…`, in the order given (newest first)."""
    commits: list[Commit] = []
    for record in text.split("\x1e"):
        if not record.strip():
            continue
        head, _, rest = record.partition("\n")
        stamp, _, subject = head.partition("\x1f")
        try:
            timestamp = int(stamp.strip())
        except ValueError:
            continue
        paths = tuple(line.strip() for line in rest.splitlines() if line.strip())
        commits.append(Commit(timestamp, paths, subject.strip()))
    return commits


@dataclass(frozen=True, slots=True)
class HistoryWeights:
    half_life: float = 100.0
    """Commits after which a change counts half as much (recency and co-change)."""
    max_commit_files: int = 20
    """Commits touching more files than this are sweeping changes: no co-change, no subjects."""


class History:
    """Per-file signals from the commit log (see the module docstring). Pure and immutable after
    construction; building it from 2,000 commits takes a few milliseconds."""

    def __init__(self, commits: Sequence[Commit], weights: HistoryWeights = HistoryWeights()) -> None:
        self.weights = weights
        self.commits = list(commits)
        self._touching: dict[str, list[int]] = {}
        recency: dict[str, float] = {}
        subjects: dict[str, Counter[str]] = {}
        for rank, commit in enumerate(self.commits):
            paths = set(commit.paths)
            if not paths:
                continue
            w = self.commit_weight(rank, len(paths))
            terms = text_terms(commit.subject) if len(paths) <= weights.max_commit_files else []
            for path in paths:
                self._touching.setdefault(path, []).append(rank)
                recency[path] = recency.get(path, 0.0) + w
                if terms:
                    subjects.setdefault(path, Counter()).update(terms)
        top = max(recency.values(), default=0.0) or 1.0
        self.recency: dict[str, float] = {p: v / top for p, v in recency.items()}
        self.subjects: Field[str] = Field(k1=1.2, b=0.5)
        for path, counts in subjects.items():
            self.subjects.add(path, counts)

    def commit_weight(self, rank: int, files: int) -> float:
        return float(0.5 ** (rank / self.weights.half_life) / files ** 0.5)

    def cochange(self, files: Iterable[str]) -> dict[str, float]:
        """How much each other file changed together with `files`, at most 1."""
        given = set(files)
        out: dict[str, float] = {}
        seen: set[int] = set()
        for path in given:
            for rank in self._touching.get(path, ()):
                if rank in seen:
                    continue
                seen.add(rank)
                paths = set(self.commits[rank].paths)
                if len(paths) > self.weights.max_commit_files:
                    continue
                w = self.commit_weight(rank, len(paths))
                for other in paths - given:
                    out[other] = out.get(other, 0.0) + w
        top = max(out.values(), default=0.0) or 1.0
        return {p: v / top for p, v in out.items()}


@dataclass(frozen=True)
class Signals:
    """Everything the ranker may use beyond the query and the files: the git `History` (or None
    outside a repository), the `active` (open) files and the files `edited` lately."""

    history: History | None = None
    active: Collection[str] = field(default_factory=tuple)
    edited: Sequence[str] = field(default_factory=tuple)

    def context_files(self) -> set[str]:
        return set(self.active) | set(self.edited)
