"""What the chat route answers on a small local model: holes cut from real code, sent through
Margin's completion path (route choice, budget, post-processing) to the real llama.cpp server with
Gemma 3 270M, once with the answer as JSON held to a schema and once as plain code in a fenced
block. Each suggestion is sorted as a person would see it:

  code       inserted at the cursor, the file still parses
  broken     inserted, the file no longer parses (and it is not prose)
  prose      words, not code
  echo       Margin's own instructions again (eight words in a row of them, the hole's marker, a
             chat template's turn), or the file again (two of its lines in a row, or a line of
             20 characters or more that is not the hole's own): never code, whatever it parses as
  schema     a word of the answer's schema (`completion`, `HoleAnswer`, ...) instead of code
  suffix     repeats what follows the cursor (the next line, or the rest of the line)
  empty      no suggestion

plus `exact` (the hole's own text), and for `empty` why Margin showed nothing (core/completion/
junk.py: instructions, file copy, misplaced, empty, nothing new). Holes: lines of httpx's Python at the bundle's newest commit,
chosen with a fixed seed; two in three are cut in the middle of the line (the rest of the line is
the hole), one in three at the line's first character after its indentation (the whole line).

    .venv/bin/python benchmarks/eval_chat_holes.py                   # 50 holes, both formats
    .venv/bin/python benchmarks/eval_chat_holes.py --holes 4 --source DIR   # CI: holes from DIR's Python

Exits 1 when any answer in the default (fenced) format is a schema word or an echo (the target:
none), 2 without the bundle.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "server"))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import itertools

from tests.conftest import running_llama_server

from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.core.completion import formats, junk
from margin.core.vfs import Position
from margin.services.app import MarginApp
from margin.services.completion import CompletionRequest, CompletionService
from margin.wiring import LOCAL_WORKSPACE, make_provider, make_server_counter
from timing import finish, verdict

BUNDLE = Path("/work/shared/data/httpx.bundle")
SCHEMA_WORDS = {"holeanswer", "hole_answer", "completion", "title", "properties", "additionalproperties"}
"""the answer formats' own words (a legitimate answer could be `string` or `type`: those are not counted)"""
KINDS = ("code", "broken", "prose", "echo", "schema", "suffix", "empty")
ECHO_LINE = 20
"""a shown line this long that the file already has elsewhere is an echo of it"""
FORMATS = ("json", "fenced")
DEFAULT = "fenced"
"""the format Margin sends (CompletionService.answer_format): the one whose target is judged"""


@dataclass(frozen=True)
class Hole:
    path: str
    text: str
    line: int
    column: int
    expected: str
    """the text cut out: the rest of the line from the cursor"""


def holes_from(root: Path, count: int, seed: int) -> list[Hole]:
    rng = random.Random(seed)
    files = sorted(p for p in root.rglob("*.py") if p.stat().st_size < 60_000)
    candidates = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.split("\n")):
            code = line.strip()
            if 12 <= len(code) <= 90 and not code.startswith(("#", '"', "'", "@")) and '"""' not in line:
                candidates.append((path, text, number, line))
    chosen = []
    for path, text, number, line in rng.sample(candidates, count):
        indent = len(line) - len(line.lstrip())
        column = indent if len(chosen) % 3 == 2 else rng.randint(indent + 4, len(line) - 3)
        lines = text.split("\n")
        lines[number] = line[:column]
        chosen.append(Hole(str(path.relative_to(root.parent)), "\n".join(lines), number, column, line[column:]))
    # In file order: a hole's prompt then shares its start with the one before (llama.cpp reuses it).
    return sorted(chosen, key=lambda h: (h.path, h.line))


def parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError):
        return False


def sort_answer(hole: Hole, suggestion: str | None) -> str:
    if suggestion is None or not suggestion.strip():
        return "empty"
    shown = suggestion.strip()
    if shown.strip("`\"'{}: ").lower() in SCHEMA_WORDS or '"completion"' in shown:
        return "schema"
    lines = hole.text.split("\n")
    following = next((line.strip() for line in lines[hole.line + 1:] if line.strip()), "")
    if following and shown.split("\n")[-1].strip() == following:
        return "suffix"
    if echoes(hole, suggestion):
        return "echo"
    offset = sum(len(line) + 1 for line in lines[:hole.line]) + hole.column
    if parses(hole.text[:offset] + suggestion + hole.text[offset:]):
        return "code"
    words = re.findall(r"[A-Za-z]{2,}", shown)
    if len(words) >= 3 and not re.search(r"[()\[\]{}=_]", shown):
        return "prose"
    return "broken"


def echoes(hole: Hole, suggestion: str) -> bool:
    """The suggestion is Margin's prompt or the file again (as `echo` above says)."""
    if junk.echoes_instructions(suggestion, formats.HOLE_SYSTEM, suggestion):
        return True
    lines = hole.text.split("\n")
    others = [junk.normal(line) for n, line in enumerate(lines) if n != hole.line and line.strip()]
    pairs = set(itertools.pairwise(others))
    shown = [junk.normal(line) for line in suggestion.split("\n") if line.strip()]
    expected = junk.normal(lines[hole.line] + hole.expected)
    if any(pair in pairs for pair in itertools.pairwise(shown)):
        return True
    return any(len(line) >= ECHO_LINE and line in others and line != expected for line in shown)


async def run_format(base_url: str, holes: list[Hole], answer_format: str, tmp: Path) -> list[dict]:
    env = {"MARGIN_DEFAULTS_BASE_URL": base_url, "MARGIN_DATABASE": str(tmp / f"{answer_format}.db"),
           "MARGIN_COMPLETION_TIMEOUT_S": "600", "MARGIN_SETTINGS": str(tmp / "none.json")}
    app = MarginApp.create(make_provider, make_server_counter, SQLiteThreadStore, env, LOCAL_WORKSPACE)
    service = CompletionService(app)
    service.answer_format = answer_format  # type: ignore[assignment]
    results = []
    try:
        for i, hole in enumerate(holes):
            uri = f"file:///ws/{hole.path}"
            app.files.open(uri, "python", 1, hole.text)
            started = time.perf_counter()
            outcome = await service.complete(CompletionRequest(uri, Position(hole.line, hole.column), 1))
            seconds = time.perf_counter() - started
            app.files.close(uri)
            text = outcome.suggestion.text if outcome.suggestion else None
            results.append({"hole": i, "path": hole.path, "line": hole.line + 1, "route": outcome.route,
                            "kind": sort_answer(hole, text), "exact": bool(text) and text.strip() == hole.expected.strip(),
                            "seconds": round(seconds, 2), "suggestion": text, "expected": hole.expected,
                            "reason": outcome.reason, "silence": outcome.silence})
    finally:
        await app.aclose()
    return results


def report(results: dict[str, list[dict]]) -> None:
    n = len(next(iter(results.values())))
    print(f"\n{n} holes, Gemma 3 270M on llama.cpp, the chat route\n")
    print("| answer format | " + " | ".join(KINDS) + " | exact | median s |")
    print("| --- |" + " ---: |" * (len(KINDS) + 2))
    for name, rows in results.items():
        counts = [sum(r["kind"] == kind for r in rows) for kind in KINDS]
        exact = sum(r["exact"] for r in rows)
        print(f"| {name} | " + " | ".join(map(str, counts)) + f" | {exact} | {statistics.median(r['seconds'] for r in rows):.1f} |")
    for name, rows in results.items():
        routes = {r["route"] for r in rows}
        schema = sum(r["kind"] == "schema" for r in rows)
        judged = (f"target none: {verdict(schema, 0, kind='exact', what=f'{name} answers that are schema words')}"
                  if name == DEFAULT else "(measured beside the default, not a target)")
        print(f"  {name}: routes {sorted(map(str, routes))}; schema words {schema}  {judged}")
        echo = sum(r["kind"] == "echo" for r in rows)
        if name == DEFAULT:
            print(f"  {name}: shown echoes of the prompt or the file {echo}  "
                  f"target none: {verdict(echo, 0, kind='exact', what=f'{name} answers that echo the prompt or the file')}")
        silent = Counter(r.get("silence") or "no model answer" for r in rows if r["kind"] == "empty")
        print(f"  {name}: why nothing was shown: " + (", ".join(f"{k} {v}" for k, v in sorted(silent.items())) or "-"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--holes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--source", type=Path, help="cut the holes from this folder's Python instead of httpx's")
    parser.add_argument("--results", type=Path, help="write every answer here (JSON)")
    args = parser.parse_args()
    if args.source is None and not args.bundle.exists():
        print(f"no {args.bundle}: pass --bundle, the real code the holes are cut from", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if args.source is None:
            subprocess.run(["git", "clone", "-q", str(args.bundle), str(tmp / "httpx")], check=True, capture_output=True)
        (tmp / "none.json").write_text("{}")
        source = args.source or tmp / "httpx" / "httpx"
        holes = holes_from(source, args.holes, args.seed)
        results = {}
        with running_llama_server(tmp / "llama.log") as server:
            for answer_format in args.formats.split(","):
                results[answer_format] = asyncio.run(run_format(server.base_url, holes, answer_format, tmp))
    report(results)
    if args.results:
        args.results.write_text(json.dumps(results, indent=1))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
