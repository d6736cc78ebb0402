"""Mines the Python golden cases of completion post-processing from the httpx repository's
history: real functions, the cursor put inside them, and raw outputs written the way models
misbehave. The expected suggestion follows from how each raw output was made (the true middle,
or nothing), never from running the code under test.

    python tests/unit/core/completion/mine_python_cases.py [httpx.bundle or clone]

writes golden/python_httpx.json next to this script (the tests read only that file).
"""

from __future__ import annotations

import ast
import json
import random
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

COMMITS = ("ae1b9f66238f75ced3ced5e4485408435de10768",  # 2025-12-10
           "89a8100da0edb2d2de7d2de6e9eb5c3e63cab2e0")  # 2020-05-30
FILES = ("httpx/_client.py", "httpx/_models.py", "httpx/_auth.py", "httpx/_config.py",
         "httpx/_urls.py", "httpx/_content.py", "httpx/_decoders.py", "httpx/_utils.py",
         "httpx/_multipart.py", "httpx/_urlparse.py", "httpx/_transports/default.py",
         "httpx/_transports/wsgi.py", "httpx/_api.py")
PER_VARIANT = 5
AFTER_LINES = 30
"""Lines of the document after the cursor kept in a case (the prefix starts at the function)."""
QWEN = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|endoftext|>", "<|fim_pad|>",
        "<|file_sep|>", "<|repo_name|>"]
STARCODER = ["<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<|endoftext|>", "<file_sep>"]
THOUGHT = ("<think>\nThe cursor is inside `{name}`. The code after it already exists, so I only "
           "need the missing part.\n</think>\n\n")


@dataclass
class Function:
    source: str        # "httpx@sha:path:line"
    text: str          # the whole file
    lines: list[str]
    name: str
    indent: str        # the def line's indentation
    body: list[int]    # 0-based line numbers of the body after any docstring
    end: int           # 0-based last line of the function
    start: int         # 0-based first line of the function (its first decorator)

    def offset(self, line: int) -> int:
        return sum(len(x) + 1 for x in self.lines[:line])

    def before(self, line: int) -> str:
        """The document up to `line` (kept in the case: from the function's start)."""
        return self.text[self.offset(self.start): self.offset(line)]

    def after(self, line: int, column: int) -> str:
        """The document from `line`'s `column` (kept in the case: AFTER_LINES lines of it)."""
        return "\n".join(self.text[self.offset(line) + column:].split("\n")[:AFTER_LINES])

    @property
    def suffix(self) -> str:  # after the function's last line (starts with "\n")
        return self.after(self.end, len(self.lines[self.end]))

    @property
    def next_line(self) -> str:
        return next(x for x in self.lines[self.end + 1:] if x.strip())


def read(repo: Path, commit: str, path: str) -> str | None:
    done = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"],
                          capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def balanced(line: str) -> bool:
    depth = 0
    for c in re.sub(r"(\"[^\"]*\"|'[^']*')", "", line):
        depth += c in "([{"
        depth -= c in ")]}"
        if depth < 0:
            return False
    return depth == 0


def functions(repo: Path) -> list[Function]:
    found = []
    for commit in COMMITS:
        for path in FILES:
            text = read(repo, commit, path)
            if not text:
                continue
            lines = text.split("\n")
            for node in ast.walk(ast.parse(text)):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                statements = node.body
                if (isinstance(statements[0], ast.Expr) and isinstance(statements[0].value, ast.Constant)
                        and isinstance(statements[0].value.value, str)):
                    statements = statements[1:]
                if not statements:
                    continue
                start, end = statements[0].lineno - 1, node.end_lineno - 1
                body = list(range(start, end + 1))
                indent = lines[node.lineno - 1][: len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())]
                level = indent + "    "
                if not 2 <= len(body) <= 10 or any(not lines[i].strip() for i in body):
                    continue
                if any(not lines[i].startswith(level) or len(lines[i]) > 100 or '"""' in lines[i]
                       or "'''" in lines[i] or "\t" in lines[i] for i in body):
                    continue
                if any(isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Lambda)) for s in statements
                       for n in ast.walk(s)):
                    continue
                following = [x for x in lines[end + 1:] if x.strip()]
                if not following or len(following[0]) - len(following[0].lstrip()) > len(indent):
                    continue
                if any(lines[i].rstrip() == following[0].rstrip() for i in body):
                    continue
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
                if "\n".join(lines[first:start]).count("```") % 2:
                    continue
                found.append(Function(f"httpx@{commit[:10]}:{path}:{node.lineno}", text, lines,
                                      node.name, indent, body, end, first))
    return found


def case(name: str, rules: list[str], fn: Function, prefix: str, suffix: str, raw: str,
         expected: tuple[str, int] | None, tokens: list[str] | None = None) -> dict:
    return {"name": name, "language": "python", "rules": rules, "source": fn.source,
            "prefix": prefix, "suffix": suffix, "raw": raw, "fim_tokens": tokens or [],
            "expected": None if expected is None else {"text": expected[0], "replaces": expected[1]}}


def line_start_cursors(fn: Function) -> list[tuple[str, str, str, int]]:
    """(prefix, middle, suffix, k): the cursor after the indentation of body line k (at the
    function body's level, opening nothing), the middle the rest of the function."""
    level = len(fn.indent) + 4
    out = []
    for k in fn.body:
        line = fn.lines[k]
        if len(line) - len(line.lstrip()) != level or not balanced(line) or line.rstrip().endswith(":"):
            continue
        if fn.lines[k - 1].strip() == line.strip():
            continue
        prefix = fn.before(k) + line[:level]
        middle = "\n".join([line[level:], *fn.lines[k + 1: fn.end + 1]])
        out.append((prefix, middle, fn.suffix, k))
    return out


def below_a_statement(fn: Function) -> list[tuple[str, str, str, int]]:
    """Line-start cursors whose line above is a statement long enough to count as a repeat."""
    return [c for c in line_start_cursors(fn) if len(fn.lines[c[3] - 1].strip()) >= 6
            and re.search(r"\w", fn.lines[c[3] - 1])]


def mid_line_cursors(fn: Function) -> list[tuple[str, str, str, int]]:
    """The cursor after a `.`, `(`, `= ` or `return ` in body line k; the middle the rest of the
    function (the cursor's line stays open to the end of the line)."""
    out = []
    for prefix, _, suffix, k in line_start_cursors(fn):
        line = fn.lines[k]
        spots = [m.end() for m in re.finditer(r"(\.|= |return |\()(?=\w)", line)]
        for p in spots[:1]:
            typed = line[:p]
            if line[p:].startswith(typed.lstrip()):
                continue
            middle = "\n".join([line[p:], *fn.lines[k + 1: fn.end + 1]])
            out.append((fn.before(k) + typed, middle, suffix, k))
    return out


def in_line_cursors(fn: Function) -> list[tuple[str, str, str, str, int]]:
    """(prefix, middle, rest, suffix, k): a middle inside one line, code after it on the line."""
    out = []
    for k in fn.body:
        line = fn.lines[k]
        m = re.search(r"(?<=[ (.=])(\w+(?:\.\w+)*)(?=( [=!<>+-]|, |\)\.|\.\w+\())", line)
        if not m or not re.search(r"\w", line[m.end():]):
            continue
        typed, middle, rest = line[: m.start()], m.group(1), line[m.end():]
        if middle.startswith(typed.lstrip()) or rest.startswith(middle[-1:]):
            continue
        out.append((fn.before(k) + typed, middle, rest, fn.after(k, len(typed) + len(middle)), k))
    return out


def auto_close_cursors(fn: Function) -> list[tuple[str, str, str, str, int]]:
    """A line ending in a call's closing brackets: the cursor after the last call's `(`, the
    editor's auto-closed `)` (and what closes with it) after it."""
    out = []
    for k in fn.body:
        line = fn.lines[k]
        m = re.search(r"\w\(([^()\"']+)(\)+\]?)$", line)
        if not m or not balanced(line):
            continue
        typed, middle, rest = line[: m.start(1)], m.group(1), m.group(2)
        if middle.startswith(typed.lstrip()):
            continue
        out.append((fn.before(k) + typed, middle, rest, fn.after(k, len(typed) + len(middle)), k))
    return out


def tabbed(middle: str) -> str:
    first, *rest = middle.split("\n")
    return "\n".join([first, *(re.sub(r"^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), x)
                               for x in rest)])


def next_def(fn: Function) -> str:
    return (f"\n\n{fn.indent}def _{fn.name.strip('_')}_helper(self):\n{fn.indent}    return None\n"
            if fn.indent else f"\n\n\ndef _{fn.name.strip('_')}_helper():\n    return None\n")


def mine(repo: Path) -> list[dict]:
    rng = random.Random(20251210)
    fns = functions(repo)
    rng.shuffle(fns)
    cases: list[dict] = []

    def pick(cursors, variant):
        chosen, used = [], set()
        for fn in fns:
            for cursor in cursors(fn):
                if fn.source not in used:
                    used.add(fn.source)
                    chosen.append((fn, cursor))
                    break
            if len(chosen) == PER_VARIANT:
                break
        for n, (fn, cursor) in enumerate(chosen):
            cases.append(variant(f"{n + 1}", fn, *cursor))
        rng.shuffle(fns)

    def named(kind, rules, build):
        def variant(n, fn, *cursor):
            return build(f"python/{kind}/{n}-{fn.name}", rules, fn, *cursor)
        return variant

    # the cursor at the start of a line: the rest of the function is missing
    pick(line_start_cursors, named("block_as_is", ["plain"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, m, (m, 0))))
    pick(line_start_cursors, named("fim_tokens_qwen", ["tokens"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, "<|fim_middle|>" + m + "<|endoftext|><|file_sep|>tests/test_client.py\nimport httpx\n",
              (m, 0), QWEN)))
    pick(line_start_cursors, named("fim_tokens_starcoder", ["tokens"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, m + "<file_sep>httpx/_types.py\n<fim_prefix>", (m, 0), STARCODER)))
    pick(line_start_cursors, named("fenced", ["fence", "echo"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, "```python\n" + p.split("\n")[-1] + m + "\n```\n", (m, 0))))
    pick(below_a_statement, named("repeats_line_above", ["echo"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, fn.lines[k - 1] + "\n" + p.split("\n")[-1] + m, (m, 0))))
    pick(line_start_cursors, named("runs_into_next_def", ["scope"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, m + next_def(fn), (m, 0))))
    pick(line_start_cursors, named("repeats_suffix", ["next_line", "overlap"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, m + "\n".join(s.split("\n")[:6]), (m, 0))))
    pick(line_start_cursors, named("tabs_for_spaces", ["reindent"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, tabbed(m), (m, 0))))
    pick(line_start_cursors, named("think_block", ["think"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, THOUGHT.format(name=fn.name) + m, (m, 0))))
    pick(line_start_cursors, named("trailing_whitespace", ["trailing"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, m + "   \n\n  \n", (m, 0))))
    pick(line_start_cursors, named("only_the_next_lines", ["next_line", "empty"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, "\n".join(s.split("\n")[:4]), None)))
    pick(line_start_cursors, named("unclosed_think", ["think", "empty"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, "<think>\nLooking at `" + fn.name + "`, the next statement should", None)))
    # the cursor inside a line that is not finished: the rest of it and of the function missing
    pick(mid_line_cursors, named("line_end_as_is", ["plain"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, m, (m, 0))))
    pick(mid_line_cursors, named("repeats_typed_line", ["echo"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, p.split("\n")[-1] + m, (m, 0))))
    pick(lambda fn: [c for c in mid_line_cursors(fn) if c[3] - 2 >= fn.start],
         named("repeats_lines_and_typed", ["echo"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, "\n".join(fn.lines[k - 2: k]) + "\n" + p.split("\n")[-1] + m, (m, 0))))
    pick(mid_line_cursors, named("end_token_then_junk", ["tokens"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, m + "<|endoftext|>\n\ndef unrelated():\n    pass", (m, 0), QWEN)))
    pick(mid_line_cursors, named("line_end_runs_into_next_def", ["scope"], lambda nm, r, fn, p, m, s, k:
         case(nm, r, fn, p, s, m + next_def(fn), (m, 0))))
    # a middle inside a line, code after it on the line
    pick(in_line_cursors, named("in_line_as_is", ["midline"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, m, (m, 0))))
    pick(in_line_cursors, named("in_line_completes_line", ["midline", "overlap"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, m + rest, (m, 0))))
    pick(in_line_cursors, named("in_line_runs_on", ["midline", "overlap"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, m + rest + "\n" + "\n".join(fn.lines[k + 1: k + 3]), (m, 0))))
    pick(in_line_cursors, named("in_line_whole_line", ["midline", "echo", "overlap"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, fn.lines[k], (m, 0))))
    pick(in_line_cursors, named("in_line_new_lines", ["midline"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, m + "\n" + fn.indent + "    return None", (m, 0))))
    pick(in_line_cursors, named("in_line_only_rest", ["midline", "overlap", "empty"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, rest, None)))
    # the cursor between a call's brackets the editor closed itself
    pick(auto_close_cursors, named("auto_close_included", ["auto_close"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, m + rest, (m + rest, len(rest)))))
    pick(auto_close_cursors, named("auto_close_missing", ["auto_close"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, m, (m, 0))))
    pick(auto_close_cursors, named("auto_close_runs_on", ["auto_close", "next_line"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, m + rest + "\n" + "\n".join(fn.lines[k + 1: k + 4]), (m + rest, len(rest)))))
    pick(auto_close_cursors, named("auto_close_whole_line", ["auto_close", "echo"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, fn.lines[k], (m + rest, len(rest)))))
    pick(auto_close_cursors, named("auto_close_only_closers", ["auto_close", "empty"], lambda nm, r, fn, p, m, rest, s, k:
         case(nm, r, fn, p, s, rest, None)))
    return cases


def main() -> None:
    source = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/httpx.bundle")
    with tempfile.TemporaryDirectory() as tmp:
        repo = source
        if source.is_file():
            repo = Path(tmp) / "httpx"
            subprocess.run(["git", "clone", "-q", str(source), str(repo)], check=True)
        cases = mine(repo)
    out = Path(__file__).parent / "golden" / "python_httpx.json"
    out.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases -> {out}")


if __name__ == "__main__":
    main()
