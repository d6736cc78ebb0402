"""Edit operations: the model's proposed changes, checked against the exact text it saw, turned
into offset edits, applied, and rebased onto newer text only when that is provably exact.

An op is `{op: insert|replace|delete, target_file, target: document|selection|cursor|match,
match?, content?}`:

    document   insert appends to the end; replace and delete cover the whole text
    selection  the request's selection (its file only); insert goes before it
    cursor     the request's cursor (its file only); insert only
    match      the one place `match` occurs in the text (it must occur exactly once);
               insert goes right after it

`content` is required for insert and replace and forbidden for delete. Ops on one file must not
overlap or touch (their order would be ambiguous). Any violation rejects the whole set, with
every problem named by the op's number.

Rebase: when the file has changed since the model saw it, the ops are moved onto the current
text only if every change since lies clear of every op's region (line-granular, and a change
merely touching a region counts as touching it), and the lines each op touches occur exactly
once in both texts, alone and with the line before and the line after them (so where it
belongs, and whether the user's change reached it, is not a guess); the result is then exactly
the user's changes and the ops, both applied. Otherwise nothing is applied.
"""

from __future__ import annotations

import difflib
import json
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from margin.core.answer_schema import answer_schema

OpKind = Literal["insert", "replace", "delete"]
Target = Literal["document", "selection", "cursor", "match"]
OP_KINDS: tuple[str, ...] = get_args(OpKind)
TARGETS: tuple[str, ...] = get_args(Target)


@dataclass(frozen=True)
class EditOp:
    op: str
    target_file: str
    target: str
    match: str | None = None
    content: str | None = None

    def describe(self, index: int, names: Mapping[str, str] | None = None) -> str:
        where = (names or {}).get(self.target_file, self.target_file)
        return f"op {index + 1} ({self.op} {self.target} in {where})"


@dataclass(frozen=True)
class Anchor:
    """The request's selection or cursor: a file and code-point offsets into the text the
    model saw (start == end for a cursor)."""

    uri: str
    start: int
    end: int


@dataclass(frozen=True)
class OffsetEdit:
    """Replace text[start:end] with `text`; `op` is the index of the op it came from."""

    start: int
    end: int
    text: str
    op: int


class OpsRejected(ValueError):
    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("The proposed edit was rejected, nothing was applied: " + "; ".join(self.problems))


def resolve(
    ops: Sequence[EditOp],
    bases: Mapping[str, str],
    *,
    selection: Anchor | None = None,
    cursor: Anchor | None = None,
    names: Mapping[str, str] | None = None,
) -> dict[str, list[OffsetEdit]]:
    """The offset edits of `ops` on `bases` (uri → the text the model saw), by file, sorted.
    Raises OpsRejected naming every problem."""
    problems: list[str] = []
    edits: dict[str, list[OffsetEdit]] = {}
    for index, op in enumerate(ops):
        name = op.describe(index, names)
        problem = _check_shape(op)
        if problem is None and op.target_file not in bases:
            problem = "targets a file the model was not shown (it must be one of the files sent)"
        if problem is None:
            span = _span(op, bases[op.target_file], selection, cursor)
            if isinstance(span, str):
                problem = span
            else:
                start, end = span
                edits.setdefault(op.target_file, []).append(
                    OffsetEdit(start, end, op.content or "", index))
        if problem:
            problems.append(f"{name}: {problem}")
    for file_edits in edits.values():
        file_edits.sort(key=lambda e: (e.start, e.end, e.op))
        for before, after in pairwise(file_edits):
            if after.start <= before.end:  # overlapping, or touching: order would be ambiguous
                problems.append(f"{ops[before.op].describe(before.op, names)} and "
                                f"{ops[after.op].describe(after.op, names)} overlap or touch")
    if problems:
        raise OpsRejected(problems)
    return edits


def _check_shape(op: EditOp) -> str | None:
    if op.op not in OP_KINDS:
        return f"unknown op '{op.op}' (expected insert, replace or delete)"
    if op.target not in TARGETS:
        return f"unknown target '{op.target}' (expected document, selection, cursor or match)"
    if op.op in ("insert", "replace") and op.content is None:
        return f"{op.op} needs content"
    if op.op == "insert" and op.content == "":
        return "inserts nothing (empty content)"
    if op.op == "delete" and op.content is not None:
        return "delete takes no content"
    if op.target == "match" and not op.match:
        return "target 'match' needs the exact text to match"
    if op.target != "match" and op.match is not None:
        return "'match' is only for target 'match'"
    if op.target == "cursor" and op.op != "insert":
        return f"a cursor has no extent to {op.op}; use target selection or match"
    return None


def _span(op: EditOp, text: str, selection: Anchor | None, cursor: Anchor | None) -> tuple[int, int] | str:
    if op.target == "document":
        return (len(text), len(text)) if op.op == "insert" else (0, len(text))
    if op.target in ("selection", "cursor"):
        anchor = selection if op.target == "selection" else cursor
        if anchor is None:
            return f"the request has no {op.target}"
        if anchor.uri != op.target_file:
            return f"the {op.target} is in another file"
        if op.target == "selection" and op.op != "insert" and anchor.start == anchor.end:
            return f"the selection is empty: nothing to {op.op}"
        return (anchor.start, anchor.start) if op.op == "insert" else (anchor.start, anchor.end)
    assert op.match is not None
    found = _occurrences(text, op.match)
    if found == 0:
        return "the match text does not occur in the file"
    if found > 1:
        return f"the match text occurs {found} times; it must occur exactly once"
    first = text.find(op.match)
    end = first + len(op.match)
    return (end, end) if op.op == "insert" else (first, end)


def _occurrences(text: str, part: str, most: int = 1000) -> int:
    """How many times `part` occurs in `text`, overlapping occurrences included ("aa" occurs
    twice in "aaa"), counting no further than `most`."""
    found, at = 0, text.find(part)
    while at >= 0 and found < most:
        found += 1
        at = text.find(part, at + 1)
    return found


def apply_edits(text: str, edits: Sequence[OffsetEdit]) -> str:
    """`text` with sorted, non-overlapping `edits` applied."""
    parts, position = [], 0
    for edit in edits:
        parts.append(text[position : edit.start])
        parts.append(edit.text)
        position = edit.end
    parts.append(text[position:])
    return "".join(parts)


def rebase(edits: Sequence[OffsetEdit], base: str, current: str) -> list[OffsetEdit] | None:
    """`edits` (on `base`) moved onto `current`, or None when a change between the two touches
    any edit's region. Line-granular: an edit must lie inside an unchanged run of lines, and
    not at an end of that run where a change begins."""
    if base == current:
        return list(edits)
    base_lines = base.splitlines(keepends=True)
    current_lines = current.splitlines(keepends=True)
    base_starts = [0, *accumulate(len(line) for line in base_lines)]
    current_starts = [0, *accumulate(len(line) for line in current_lines)]
    blocks = difflib.SequenceMatcher(None, base_lines, current_lines, autojunk=False).get_opcodes()
    equal = [(i, block) for i, block in enumerate(blocks) if block[0] == "equal"]
    equal_starts = [base_starts[block[1]] for _, block in equal]
    moved = []
    for edit in edits:
        k = bisect_right(equal_starts, edit.start) - 1
        if k < 0:
            return None
        index, (_, b1, b2, c1, _) = equal[k]
        start, end = base_starts[b1], base_starts[b2]
        if not (start <= edit.start and edit.end <= end):
            return None
        if edit.start == start and index > 0:  # a change ends where the edit begins
            return None
        if edit.end == end and index < len(blocks) - 1:  # a change begins where the edit ends
            return None
        # The lines around the edit must be unique in both texts, or the alignment is a guess
        # (a user who duplicated the line makes two places the edit could belong).
        for context in _context_lines(base, base_starts, edit):
            if _occurrences(base, context, 2) != 1 or _occurrences(current, context, 2) != 1:
                return None
        shift = current_starts[c1] - start
        moved.append(OffsetEdit(edit.start + shift, edit.end + shift, edit.text, edit.op))
    return moved


def _context_lines(text: str, starts: Sequence[int], edit: OffsetEdit) -> tuple[str, str]:
    """The whole lines an edit touches (for an edit that begins at a line start, with the
    line before it), and those lines with the line before and the line after them."""
    first = bisect_right(starts, edit.start) - 1
    last_offset = edit.end - 1 if edit.end > edit.start else edit.start
    last = max(first, bisect_right(starts, last_offset) - 1)
    own_first = first - 1 if edit.start == starts[first] and first > 0 else first
    stop = min(last + 1, len(starts) - 1)
    return (text[starts[own_first] : starts[stop]],
            text[starts[max(first - 1, 0)] : starts[min(last + 2, len(starts) - 1)]])


@dataclass(frozen=True)
class ApplyPlan:
    """What applying means now: the new text of every file, or the files that are stale."""

    texts: dict[str, str]
    edits: dict[str, list[OffsetEdit]]
    """the edits on each file's *current* text (rebased where needed)"""
    stale: list[str]
    rebased: bool

    @property
    def applicable(self) -> bool:
        return not self.stale


def plan_apply(edits: Mapping[str, Sequence[OffsetEdit]], bases: Mapping[str, str],
               currents: Mapping[str, str]) -> ApplyPlan:
    """All or nothing: every file is unchanged since the model saw it, or changed only clear of
    the ops' regions (then rebased exactly); otherwise no file is touched and the stale ones
    are named."""
    texts, moved, stale, rebased = {}, {}, [], False
    for uri, file_edits in edits.items():
        current = currents.get(uri)
        if current is None:
            stale.append(uri)
            continue
        if current == bases[uri]:
            moved[uri] = list(file_edits)
        else:
            shifted = rebase(file_edits, bases[uri], current)
            if shifted is None:
                stale.append(uri)
                continue
            moved[uri], rebased = shifted, True
        texts[uri] = apply_edits(current, moved[uri])
    if stale:
        return ApplyPlan({}, {}, sorted(stale), False)
    return ApplyPlan(texts, moved, [], rebased)


# --- what the model answers ----------------------------------------------------------------

class ModelOp(BaseModel):
    """One op as the model writes it (snake_case, `target_file` is the file_id it was shown)."""

    model_config = ConfigDict(extra="forbid")

    op: OpKind
    target_file: str = Field(min_length=1)
    target: Target
    match: str | None = None
    content: str | None = None


class ModelReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assistant_message: str
    ops: list[ModelOp]


def reply_json_schema() -> dict[str, Any]:
    """The JSON schema of the model's answer: sent as `response_format` and shown in the prompt,
    from the same model that validates the answer (core/answer_schema.py)."""
    return answer_schema(ModelReply)


def json_answer_fragment(schema: dict[str, Any], rules: str) -> str:
    """How to answer, for a prompt: one JSON object following `schema` (the validator's own),
    then `rules`."""
    compact = json.dumps(schema, separators=(",", ":"))
    return ("Answer with one JSON object and nothing else (no Markdown fences), matching this JSON "
            f"schema:\n{compact}\n{rules}")


def ops_schema_fragment() -> str:
    """The prompt's description of the answer, rendered from the validator's own definitions."""
    return json_answer_fragment(
        reply_json_schema(),
        "Rules for each op: `target_file` is the path of a file shown to you, as its `File` line "
        "names it. `target` is "
        "`document` (insert appends at the end; replace and delete cover the whole file), "
        "`selection` (the user's selection; insert goes before it), `cursor` (insert only, at the "
        "user's cursor) or `match` (the single place where `match` occurs; copy that text exactly "
        "from the file, long enough to occur exactly once; insert goes right after it). `content` "
        "is required for insert and replace and must be absent for delete. Ops on one file must "
        "not overlap or touch. If no change is needed, return an empty `ops` list and say why in "
        "`assistant_message`."
    )


class ReplyRejected(ValueError):
    """The model's answer cannot be used; the message says why, for a person."""


M = TypeVar("M", bound=BaseModel)


def parse_answer(model: type[M], text: str, schema_name: str) -> M:
    """The model's JSON answer validated against `model`, or ReplyRejected saying what is wrong
    (never quoting the answer)."""
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            raise ReplyRejected("the model did not answer with valid JSON") from None
        where = ".".join(str(part) for part in first["loc"]) or "the answer"
        raise ReplyRejected(f"the model's answer does not follow {schema_name} ({where}: {first['msg']})") from None


def parse_reply(text: str) -> ModelReply:
    return parse_answer(ModelReply, text, "the edit schema")
