"""Generated model answers for the fuzz tests of every structured answer (tests/unit/services and
tests/e2e `test_fuzz_model_output.py`), and the oracles that say what Margin must make of them.

Each strategy draws an answer's *text* — a valid answer, a structured one with wrong parts, or a
mutation of a valid one (prose around it, cut short, fenced, …) — from documents full of unicode
edge cases. The oracles are written here from the documented semantics (core/editops.py's
docstring, docs/editing.md, "Edit-ops" and "Code actions"), never by calling the code under test.

`MARGIN_FUZZ_EXAMPLES` sets how many answers each test draws (the CI default is in each test
module); the full run is `MARGIN_FUZZ_EXAMPLES=1000`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from margin.core.vfs import Position

WS = "file:///ws"
A, B = f"{WS}/a.py", f"{WS}/b.py"
OUTSIDE = "file:///elsewhere/c.py"
"""an open file outside every workspace folder: the model is shown it by its URI"""


def examples(default: int) -> int:
    return int(os.environ.get("MARGIN_FUZZ_EXAMPLES", default))


# --- text ------------------------------------------------------------------------------------

ODD = ["é", "e\u0301", "😀", "👨\u200d👩\u200d👧", "\u200b", "\u200f", "\u202e", "\ufeff", "\x00", "中文",
       "\t", "\u0627\u0644\u0633\u0644\u0627\u0645", "a\u0308\u0301", "\U0001f1eb\U0001f1f7"]
"""combining marks, emoji (surrogate pairs in UTF-16, ZWJ sequences, flags), zero-width and
right-to-left marks, a BOM, NUL, tabs, CJK and Arabic"""
LONE_SURROGATES = ["\ud83d", "\ude00", "\udfff"]
"""what a JSON answer's `\\ud83d` escape decodes to: not text (cannot be encoded as UTF-8)"""
CODE_LINES = ["def f(x):", "    return x + 1", "", "class K:", "    pass", "total = 0", "total = 0",
              "# é 😀 comment", "print('中文')", "x = \"a\u200bb\"", "if x:", "        y = [1, 2]",
              "s = 'e\u0301\u202e'", "label = (\"😀 total\", )"]

odd_text = st.lists(st.sampled_from(ODD + list("ab xy_(){}:=\n\r'\"`")), max_size=24).map("".join)
huge_text = st.builds(lambda unit, n: unit * n, st.sampled_from(["x", "😀", "line\n", "e\u0301"]),
                      st.integers(20_000, 120_000))


@st.composite
def document(draw) -> str:
    lines = draw(st.lists(st.one_of(st.sampled_from(CODE_LINES), odd_text.map(lambda t: t.replace("\r", "").replace("\n", ""))),
                          min_size=1, max_size=12))
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    text = newline.join(lines)
    if draw(st.booleans()):
        text += newline
    return text


@st.composite
def answer_text(draw) -> str:
    """Text as a model may put it in a JSON string: code, unicode oddities, now and then a lone
    surrogate, rarely a huge one."""
    kind = draw(st.integers(0, 30))  # (hypothesis tries small numbers first: the plain cases)
    if kind == 30:
        return draw(huge_text)
    text = draw(st.one_of(st.sampled_from(CODE_LINES).map(lambda l: l + "\n"), odd_text, st.text(max_size=20)))
    if kind == 29:
        text += draw(st.sampled_from(LONE_SURROGATES))
    return text


def dumps(value: Any, ascii_only: bool) -> str:
    """JSON as a model writes it (lone surrogates can only travel escaped)."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True)


def line_starts(text: str) -> list[int]:
    """Where each line begins; lines end at \\n, \\r\\n or \\r (as LSP defines)."""
    return [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]


def utf16_position(text: str, offset: int) -> Position:
    """The LSP position (UTF-16) of a code-point offset."""
    starts = line_starts(text)
    line = max(i for i, s in enumerate(starts) if s <= offset)
    return Position(line, len(text[starts[line]:offset].encode("utf-16-le")) // 2)


def utf16_offset(text: str, line: int, character: int) -> int:
    """The code-point offset of an LSP position (UTF-16) that falls on a character boundary."""
    start = line_starts(text)[line]
    units = 0
    for i, char in enumerate(text[start:], start):
        if units == character:
            return i
        units += len(char.encode("utf-16-le")) // 2
    assert units == character, "a position past the end of the text"
    return len(text)


def apply_lsp_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """`text` with LSP TextEdits (UTF-16 ranges, all on the original text) applied."""
    spans = [(utf16_offset(text, e["range"]["start"]["line"], e["range"]["start"]["character"]),
              utf16_offset(text, e["range"]["end"]["line"], e["range"]["end"]["character"]), e["newText"])
             for e in edits]
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def inside_crlf(text: str, offset: int) -> bool:
    return 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n"


# --- mutations of a valid answer -------------------------------------------------------------

PROSE = ["Sure! Here is the change:", "I cannot help with that.", "```json", "<think>Let me see.</think>",
         "Here you go:\n```json\n", "", "null", "[]", "{}", "true", "\"just a string\"", "42"]


@st.composite
def mutated(draw, valid: str, keep: bool = False) -> tuple[str, str]:
    """`valid` as a careless model writes it, and the name of the mutation ("none": as is; with
    `keep`, mostly that)."""
    if keep and draw(st.integers(0, 4)) < 4:
        return valid, "none"
    how = draw(st.sampled_from(["none", "none", "none", "truncate", "prose", "fence", "prose-after",
                                "replace-prose", "double", "think", "whitespace", "bom"]))
    if how == "truncate":
        return valid[: draw(st.integers(0, max(len(valid) - 1, 0)))], how
    if how == "prose":
        return draw(st.sampled_from(PROSE)) + "\n" + valid, how
    if how == "fence":
        return f"```json\n{valid}\n```", how
    if how == "prose-after":
        return valid + "\n" + draw(st.sampled_from(PROSE + ["Hope this helps!"])), how
    if how == "replace-prose":
        return draw(st.one_of(st.sampled_from(PROSE), st.text(max_size=60))), how
    if how == "double":
        return valid + valid, how
    if how == "think":
        return "<think>\nreasoning\n</think>\n" + valid, how
    if how == "whitespace":
        return "\n\t " + valid + " \n", how
    if how == "bom":
        return "\ufeff" + valid, how
    return valid, how


# --- edit-ops ----------------------------------------------------------------------------------

KINDS, TARGETS = ("insert", "replace", "delete"), ("document", "selection", "cursor", "match")
BAD_FILES = ["../a.py", "/ws/a.py", "./a.py", "file:///other/a.py", "file:///ws/nothere.py", "nothere.py",
             "A.py", "a.py\u200b", "../../etc/passwd", "file:///etc/passwd", "ws/a.py", "a.py ", "c.py",
             "file:///elsewhere/d.py"]


def unique_pieces(text: str) -> list[str]:
    """Pieces of `text` that occur in it exactly once (what a careful model copies as `match`)."""
    lines = [line for line in text.splitlines(keepends=True) if occurrences(text, line) == 1]
    return lines or ([text] if text else [])


@st.composite
def edit_op(draw, texts: dict[str, str], names: dict[str, str], careful: bool) -> dict[str, Any]:
    """One op as the model writes it: a careful one well formed, on a file shown, with a `match`
    that occurs once; a careless one anything."""
    shown = sorted(names.values())
    stray = careful and draw(st.integers(0, 5)) == 5  # careful but for a path outside what it was shown
    target_file = draw(st.sampled_from(BAD_FILES) if stray else st.sampled_from(shown) if careful else st.one_of(
        st.sampled_from(shown), st.sampled_from(sorted(texts)), st.sampled_from(BAD_FILES)))
    uri = next((u for u, n in names.items() if n == target_file), target_file)
    text = texts.get(uri, "x = 1\n")
    kinds = KINDS if careful or draw(st.integers(0, 15)) else KINDS + ("rewrite",)
    targets = TARGETS if careful or draw(st.integers(0, 15)) else TARGETS + ("line",)
    op: dict[str, Any] = {"op": draw(st.sampled_from(kinds)), "target_file": target_file,
                          "target": draw(st.sampled_from(targets))}
    if careful and op["target"] == "match" and not unique_pieces(text):
        op["target"] = "document"
    if careful and op["target"] == "cursor":
        op["op"] = "insert"
    if op["target"] == "match" and careful:
        op["match"] = draw(st.sampled_from(unique_pieces(text)))
    elif op["target"] == "match" or (not careful and draw(st.integers(0, 12)) == 0):
        lines = text.splitlines(keepends=True) or [text]
        i = draw(st.integers(0, max(len(text) - 1, 0)))
        op["match"] = draw(st.one_of(
            st.sampled_from(lines),                                  # a whole line, unique or not
            st.just(text[i: i + draw(st.integers(1, 30))]),          # any piece
            st.just(text),                                           # the whole text
            st.sampled_from(["", "not in the file", "    return x + 1\n", "😀"]),
            answer_text()))
    if op["op"] != "delete":
        op["content"] = draw(answer_text() if careful else st.one_of(answer_text(), st.just(""), st.just(None)))
    elif not careful and draw(st.integers(0, 10)) == 0:
        op["content"] = draw(answer_text())
    if careful and op["op"] == "insert" and not op["content"]:
        op["content"] = "x"
    if careful:
        return op
    if draw(st.integers(0, 25)) == 0:
        del op[draw(st.sampled_from(sorted(op)))]
    if draw(st.integers(0, 25)) == 0:
        op[draw(st.sampled_from(["extra", "line", "targetFile", "reason"]))] = "x"
    if draw(st.integers(0, 25)) == 0:  # a wrong type
        op[draw(st.sampled_from(["op", "target_file", "target", "match", "content"]))] = draw(
            st.sampled_from([1, None, ["x"], {"a": 1}, True, 2.5]))
    return op


@st.composite
def edit_ops_answer(draw, texts: dict[str, str], names: dict[str, str]) -> tuple[str, str]:
    """(answer text, how it was made) of an edit-ops answer."""
    careful = not draw(st.booleans())
    ops = draw(st.lists(edit_op(texts, names, careful), max_size=1 if careful and draw(st.booleans()) else 4))
    reply: dict[str, Any] = {"assistant_message": draw(st.one_of(st.just("Done."), answer_text())), "ops": ops}
    shape = 20 - draw(st.integers(0, 14 if careful else 20))  # 0-5: the wrong shapes
    if shape == 0:
        del reply["assistant_message"]
    elif shape == 1:
        del reply["ops"]
    elif shape == 2:
        reply["ops"] = ops[0] if ops else {}
    elif shape == 3:
        reply["explanation"] = "extra"
    elif shape == 4:
        reply["assistant_message"] = None
    elif shape == 5:
        reply = {"assistantMessage": "camel", "ops": [{{"target_file": "targetFile"}.get(k, k): v for k, v in o.items()} for o in ops]}
    return draw(mutated(dumps(reply, draw(st.booleans())), keep=careful))


def occurrences(text: str, part: str) -> int:
    """How many times `part` occurs in `text`, overlapping ones too."""
    return sum(1 for i in range(len(text)) if text.startswith(part, i))


@dataclass(frozen=True)
class Expected:
    """What an answer must come to: rejected (`texts` None), or the new text of each file."""

    texts: dict[str, str] | None
    reply: dict[str, Any] | None = None


def _schema_ok(reply: Any) -> bool:
    """The answer's shape, as docs/editing.md ("Edit-ops") and SPEC H give it."""
    if not isinstance(reply, dict) or set(reply) != {"assistant_message", "ops"}:
        return False
    if not isinstance(reply["assistant_message"], str) or not isinstance(reply["ops"], list):
        return False
    for op in reply["ops"]:
        if not isinstance(op, dict) or not {"op", "target_file", "target"} <= set(op) <= {
                "op", "target_file", "target", "match", "content"}:
            return False
        if op["op"] not in KINDS or op["target"] not in TARGETS:
            return False
        if not isinstance(op["target_file"], str) or not op["target_file"]:
            return False
        if any(op.get(k) is not None and not isinstance(op[k], str) for k in ("match", "content")):
            return False
    return True


def parse_json(text: str) -> Any:
    """The answer as JSON, or None when it is not exactly one JSON value."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def is_text(value: Any) -> bool:
    """No string in the parsed answer holds a lone surrogate (JSON can escape one, `\\ud83d`;
    it is not text, and such an answer is no answer)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return True
        except UnicodeEncodeError:
            return False
    if isinstance(value, dict):
        return all(is_text(k) and is_text(v) for k, v in value.items())
    if isinstance(value, list):
        return all(map(is_text, value))
    return True


def expected_ops(answer: str, finish: str, texts: dict[str, str], names: dict[str, str],
                 selection: tuple[int, int] | None, cursor: int | None, active: str) -> Expected:
    """What applying the answer's ops must give, from the documented semantics:

        document   insert appends to the end; replace and delete cover the whole text
        selection  the request's selection (its file only); insert goes before it
        cursor     the request's cursor (its file only); insert only
        match      the one place `match` occurs; insert goes right after it

    content required for insert (and not empty: an insert of nothing is no edit) and replace,
    forbidden for delete; `match` only (and not empty) for target match; ops on one file may not
    overlap or touch; `target_file` names a file shown (its file_id, or its URI); any violation
    rejects all."""
    reply = parse_json(answer)
    if finish == "length" or not _schema_ok(reply) or not is_text(reply):
        return Expected(None)
    by_name = {name: uri for uri, name in names.items()}
    spans: dict[str, list[tuple[int, int, str]]] = {}
    for op in reply["ops"]:
        kind, target, match, content = op["op"], op["target"], op.get("match"), op.get("content")
        uri = by_name.get(op["target_file"], op["target_file"] if op["target_file"] in names else None)
        if uri is None:
            return Expected(None)
        if (kind in ("insert", "replace") and content is None) or (kind == "insert" and content == "") \
                or (kind == "delete" and content is not None):
            return Expected(None)
        if (target == "match") != (match is not None) or match == "" or (target == "cursor" and kind != "insert"):
            return Expected(None)
        text = texts[uri]
        if target == "document":
            span = (len(text), len(text)) if kind == "insert" else (0, len(text))
        elif target in ("selection", "cursor"):
            if uri != active:
                return Expected(None)
            if target == "selection":
                if selection is None or (kind != "insert" and selection[0] == selection[1]):
                    return Expected(None)
                span = (selection[0], selection[0]) if kind == "insert" else selection
            else:
                if cursor is None:
                    return Expected(None)
                span = (cursor, cursor)
        else:
            if occurrences(text, match) != 1:
                return Expected(None)
            at = text.index(match)
            span = (at + len(match),) * 2 if kind == "insert" else (at, at + len(match))
        spans.setdefault(uri, []).append((*span, content or ""))
    result = {}
    for uri, edits in spans.items():
        for i, a in enumerate(edits):
            for b in edits[i + 1:]:
                if a[0] <= b[1] and b[0] <= a[1]:
                    return Expected(None)
        text = texts[uri]
        for start, end, new in sorted(edits, reverse=True):
            text = text[:start] + new + text[end:]
        result[uri] = text
    return Expected(result, reply)


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- selection edits ---------------------------------------------------------------------------

@st.composite
def selection_answer(draw) -> tuple[str, str]:
    replacement = draw(answer_text())
    shape = 15 - draw(st.integers(0, 15))  # 0-3: the wrong shapes
    reply: Any = {"replacement": replacement}
    if shape == 0:
        reply = {"replacement": replacement, "explanation": "x"}
    elif shape == 1:
        reply = {"text": replacement}
    elif shape == 2:
        reply = {"replacement": draw(st.sampled_from([None, 1, ["a"], {"a": "b"}, True]))}
    elif shape == 3:
        reply = [replacement]
    return draw(mutated(dumps(reply, draw(st.booleans())), keep=shape > 3))


def expected_replacement(answer: str, finish: str, text: str, start: int, end: int) -> str | None:
    """The document after a selection edit, or None when the answer must be refused.
    docs/editing.md, "Code actions": the replacement gets the file's line endings (CRLF when the code it rewrites
    has them, or — code with no line break — when the file has), and ends in a line break exactly
    when the rewritten code did; no change is refused."""
    reply = parse_json(answer)
    if finish == "length" or not isinstance(reply, dict) or set(reply) != {"replacement"} \
            or not isinstance(reply["replacement"], str) or not is_text(reply):
        return None
    shown = text[start:end]
    crlf = "\r\n" in (shown if "\n" in shown else text)
    newline = "\r\n" if crlf else "\n"
    new = re.sub(r"\r\n", "\n", reply["replacement"])
    if crlf:
        new = new.replace("\n", "\r\n")
    if shown.endswith("\n") and not new.endswith("\n"):
        new += newline
    elif not shown.endswith("\n") and new.endswith("\n"):
        new = new[: -len(newline)] if new.endswith(newline) else new[:-1]
    if new == shown:
        return None
    return text[:start] + new + text[end:]


# --- inline completion -------------------------------------------------------------------------

FIM_TOKENS = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|endoftext|>", "<|file_sep|>",
              "<|fim_pad|>", "<|im_end|>", "<|im_start|>", "<fim_prefix>", "<fim_suffix>", "<fim_middle>",
              "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", "<|eot_id|>", "<EOT>"]
CLOSING = set(")]}\"'`>")


@st.composite
def raw_completion(draw) -> str:
    """What a FIM model writes for the middle: code, with tokens, fences, thinking, echoes."""
    parts = draw(st.lists(st.one_of(
        st.sampled_from(["a + b", "x)", "value\n    return value", "\n", "    ", "total += 1\n", "])", "'",
                         "def g():\n    pass\n", "😀", "e\u0301", "\r\n", "\u200b", "\x00", "\u202e"]),
        st.sampled_from(FIM_TOKENS), st.sampled_from(["```python\n", "```\n", "```", "<think>", "</think>",
                                                      "<think>hmm</think>", "Here is the code:\n"]),
        answer_text()), max_size=6))
    return "".join(parts)


@st.composite
def hole_answer(draw) -> tuple[str, str]:
    """The chat route's answer: the code in a fenced block, as asked, or not quite (no fence, an
    unclosed one, prose around it, or the JSON of the other format)."""
    completion = draw(raw_completion())
    if draw(st.integers(0, 3)):
        fence = draw(st.sampled_from(["```python\n", "```\n", "```py\n"]))
        close = draw(st.sampled_from(["\n```", "\n```\nThat is all.", "", "```"]))
        before = draw(st.sampled_from(["", "Here:\n", "Sure.\n\n"]))
        text = before + fence + completion + close if draw(st.integers(0, 5)) else completion
        return draw(mutated(text, keep=True))
    shape = 12 - draw(st.integers(0, 12))  # 0-2: the wrong shapes
    reply: Any = {"completion": completion}
    if shape == 0:
        reply = {"completion": completion, "note": "x"}
    elif shape == 1:
        reply = {"code": completion}
    elif shape == 2:
        reply = {"completion": draw(st.sampled_from([None, 3, ["a"]]))}
    return draw(mutated(dumps(reply, draw(st.booleans())), keep=shape > 2))


def check_suggestion(text: str, replaced: str) -> None:
    """What any suggestion shown must be (SPEC J): not empty or blank, no FIM token, no fence line,
    no thinking; what it replaces only auto-closed characters on the cursor's line."""
    assert text.strip(), "an empty suggestion"
    assert not any(token in text for token in FIM_TOKENS), "a FIM token shown"
    assert not any(line.lstrip().startswith("```") for line in text.split("\n")), "a fence shown"
    assert "<think>" not in text and "</think>" not in text, "thinking shown"
    assert set(replaced) <= CLOSING and "\n" not in replaced, "replaces more than auto-closed characters"
