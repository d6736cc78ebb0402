"""The HumanEval infilling problems (data/human-eval-infilling, MIT): each a Python function
with a hole — one line, a block of lines, or a random span — and the tests its whole must pass.

A problem becomes what an editor would hold: for a hole of whole lines (the single- and
multi-line sets), the text before it, an empty line for the cursor, and the text after it; for a
random span, the text before and after it, the cursor between. The answer is judged the same
way whoever gave it (Margin or the model called directly): the program is the prefix, the
answer, a line break if the hole was of whole lines and the answer does not end in one, the
suffix, then the problem's tests (`check(entry_point)`), run by margin.evals.sandbox.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "human-eval-infilling"
SETS = {
    "single": "HumanEval-SingleLineInfilling.jsonl.gz",
    "multi": "HumanEval-MultiLineInfilling.jsonl.gz",
    "span": "HumanEval-RandomSpanInfillingLight.jsonl.gz",
}
"""the sets by the name `margin eval completion --set` takes: 1,033, 5,815 and 164 problems"""


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str
    suffix: str
    solution: str
    test: str
    entry_point: str

    @property
    def whole_lines(self) -> bool:
        """The hole is of whole lines: the text before it ends a line, and so does its solution."""
        return self.prompt.endswith("\n") and self.solution.endswith("\n")

    def document(self) -> tuple[str, int, int]:
        """The text an editor holds for this problem, and the cursor's line and column (from 0,
        in characters)."""
        text = self.prompt + ("\n" if self.whole_lines else "") + self.suffix
        lines = self.prompt.split("\n")
        return text, len(lines) - 1, len(lines[-1])

    @property
    def cursor(self) -> int:
        """The cursor's offset in `document()`'s text, in characters: the hole starts there."""
        return len(self.prompt)

    def filled(self, answer: str, replaces: int = 0) -> str:
        """The function with `answer` in its hole, in place of the `replaces` characters after
        it (an editor's suggestion may rewrite the auto-closed characters after the cursor)."""
        gap = "\n" if self.whole_lines and not answer.endswith("\n") else ""
        return self.prompt + answer + gap + self.suffix[replaces:]

    def program(self, answer: str, replaces: int = 0) -> str:
        """What the sandbox runs: the filled function, its tests, and the call of the tests."""
        return f"{self.filled(answer, replaces)}\n\n{self.test}\n\ncheck({self.entry_point})\n"


class ProblemsError(Exception):
    """The problems cannot be read (a missing or damaged file, an unknown set)."""


def load(name: str, data: Path = DATA) -> list[Problem]:
    """Every problem of the set `name`, in the file's order."""
    if name not in SETS:
        raise ProblemsError(f"no set {name!r}: the sets are {', '.join(SETS)}")
    path = data / SETS[name]
    problems = []
    try:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                problems.append(Problem(record["task_id"], record["prompt"], record["suffix"],
                                        record["canonical_solution"], record["test"], record["entry_point"]))
    except (OSError, EOFError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        where = f"line {number} of " if "number" in locals() else ""
        raise ProblemsError(f"cannot read {where}{path}: {type(error).__name__}: {error}") from None
    return problems


def sample(problems: list[Problem], limit: int | None, seed: int) -> list[Problem]:
    """`limit` problems chosen with `seed` (every one when None or more than there are), in
    the set's order: the same seed gives the same problems on any machine."""
    if limit is None or limit >= len(problems):
        return list(problems)
    chosen = sorted(random.Random(seed).sample(range(len(problems)), limit))
    return [problems[i] for i in chosen]
