"""Edit-ops: the rules that reject a set, and properties of apply and rebase."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from margin.core.editops import Anchor, EditOp, OffsetEdit, OpsRejected, apply_edits, plan_apply, rebase, resolve

A = "file:///ws/a.py"
B = "file:///ws/b.py"
BASE = "def f():\n    return 1\n\ndef g():\n    return 2\n"


def apply_ops(ops, **kw):
    edits = resolve(ops, {A: BASE, B: "x = 1\n"}, **kw)
    return {uri: apply_edits({A: BASE, B: "x = 1\n"}[uri], e) for uri, e in edits.items()}


def test_each_target_does_what_it_says():
    sel = Anchor(A, BASE.index("return 1"), BASE.index("return 1") + len("return 1"))
    cur = Anchor(A, 0, 0)
    assert apply_ops([EditOp("replace", A, "match", match="return 2", content="return 3")])[A].endswith("return 3\n")
    assert apply_ops([EditOp("insert", A, "match", match="def g():", content="  # g")])[A].count("def g():  # g\n") == 1
    assert apply_ops([EditOp("delete", A, "match", match="\ndef g():\n    return 2\n")])[A] == "def f():\n    return 1\n"
    assert apply_ops([EditOp("replace", A, "selection", content="return 42")], selection=sel)[A].startswith("def f():\n    return 42\n")
    assert apply_ops([EditOp("insert", A, "selection", content="# ")], selection=sel)[A].startswith("def f():\n    # return 1")
    assert apply_ops([EditOp("insert", A, "cursor", content="import os\n")], cursor=cur)[A].startswith("import os\ndef f")
    assert apply_ops([EditOp("insert", B, "document", content="y = 2\n")])[B] == "x = 1\ny = 2\n"
    assert apply_ops([EditOp("replace", B, "document", content="z = 3\n")])[B] == "z = 3\n"
    assert apply_ops([EditOp("delete", B, "document")])[B] == ""
    two = apply_ops([EditOp("replace", A, "match", match="return 1", content="return 10"),
                     EditOp("replace", B, "document", content="w = 0\n")])
    assert "return 10" in two[A] and two[B] == "w = 0\n"


@pytest.mark.parametrize("ops,kw,problem", [
    ([EditOp("replace", A, "match", match="return", content="x")], {}, "op 1 (replace match in a.py): the match text occurs 2 times"),
    ([EditOp("replace", A, "match", match="nowhere", content="x")], {}, "does not occur"),
    ([EditOp("insert", A, "document")], {}, "insert needs content"),
    ([EditOp("insert", A, "document", content="")], {}, "inserts nothing"),
    ([EditOp("delete", A, "document", content="x")], {}, "delete takes no content"),
    ([EditOp("replace", A, "cursor", content="x")], {"cursor": Anchor(A, 0, 0)}, "a cursor has no extent"),
    ([EditOp("replace", A, "selection", content="x")], {}, "the request has no selection"),
    ([EditOp("replace", B, "selection", content="x")], {"selection": Anchor(A, 0, 3)}, "the selection is in another file"),
    ([EditOp("delete", A, "selection")], {"selection": Anchor(A, 2, 2)}, "the selection is empty"),
    ([EditOp("replace", "file:///elsewhere.py", "document", content="x")], {}, "was not shown"),
    ([EditOp("rewrite", A, "document", content="x")], {}, "unknown op 'rewrite'"),
    ([EditOp("replace", A, "line", content="x")], {}, "unknown target 'line'"),
    ([EditOp("replace", A, "document", match="x", content="y")], {}, "'match' is only for target 'match'"),
    ([EditOp("replace", A, "match", match="return 1", content="a"),
      EditOp("delete", A, "match", match="urn 1\n\ndef")], {}, "op 1 (replace match in a.py) and op 2 (delete match in a.py) overlap"),
    ([EditOp("insert", A, "document", content="a"), EditOp("insert", A, "document", content="b")], {}, "overlap or touch"),
])
def test_any_violation_rejects_the_whole_set_naming_the_op(ops, kw, problem):
    good = EditOp("replace", B, "document", content="fine\n")
    with pytest.raises(OpsRejected) as caught:
        resolve([good, *ops] if "op 1" not in problem else ops, {A: BASE, B: "x = 1\n"},
                names={A: "a.py", B: "b.py"}, **kw)
    assert problem in str(caught.value) and "nothing was applied" in str(caught.value)


lines = st.lists(st.sampled_from(["a = 1", "b = 2", "def f():", "    return x", "", "# é 😀", "x"]), min_size=1, max_size=12)


@st.composite
def scenario(draw):
    base_lines = draw(lines)
    base = "".join(line + "\n" for line in base_lines)
    # The model's edits: non-overlapping, non-touching spans anywhere in the text.
    points = sorted(draw(st.lists(st.integers(0, len(base)), max_size=6, unique=True)))
    ops = []
    for start, end in zip(points[::2], points[1::2]):
        if ops and start <= ops[-1].end:
            continue
        ops.append(OffsetEdit(start, end, draw(st.sampled_from(["", "NEW", "z\n"])), len(ops)))
    # The user's changes: whole lines replaced, inserted or deleted.
    user = []
    line_starts = [sum(len(l) + 1 for l in base_lines[:i]) for i in range(len(base_lines) + 1)]
    for i in sorted(draw(st.lists(st.integers(0, len(base_lines)), max_size=3, unique=True))):
        kind = draw(st.sampled_from(["insert", "replace", "delete"])) if i < len(base_lines) else "insert"
        s = line_starts[i]
        e = s if kind == "insert" else line_starts[i + 1]
        text = "" if kind == "delete" else draw(st.sampled_from(["user line\n", "other\n", "b = 2\n"]))
        user.append(OffsetEdit(s, e, text, 100 + i))
    return base, ops, user


@settings(max_examples=500, deadline=None)
@given(scenario())
def test_rebase_is_exact_or_refuses(case):
    base, ops, user = case
    current = apply_edits(base, user)
    moved = rebase(ops, base, current)
    if current == base:
        assert moved == ops
    if moved is None:
        return
    # The user's changes and the ops lie clear of each other: applying both to the base in
    # either order gives one text, and the rebased ops give exactly that text.
    combined = sorted(user + ops, key=lambda e: (e.start, e.end, e.op))
    assume(all(a.end < b.start or (a.end == b.start and a.start < a.end and b.start < b.end)
               for a, b in itertools.pairwise(combined)))
    assert apply_edits(current, moved) == apply_edits(base, combined)


def test_rebase_moves_ops_past_a_change_elsewhere():
    base = "one\ntwo\nthree\nfour\n"
    ops = [OffsetEdit(base.index("four"), base.index("four") + 4, "FOUR", 0)]
    current = "zero\none\ntwo\nthree\nfour\n"
    moved = rebase(ops, base, current)
    assert apply_edits(current, moved) == "zero\none\ntwo\nthree\nFOUR\n"
    assert rebase(ops, base, "one\ntwo\nthree\nfour!\n") is None  # the op's own line changed
    assert rebase(ops, base, "one\ntwo\nTHREE\nfour\n") is None  # a change right up to it
    # An insert where the user replaced the next line could go before or after their line:
    insert = [OffsetEdit(base.index("three"), base.index("three"), "# note\n", 0)]
    assert rebase(insert, base, "one\ntwo\n3\nfour\n") is None


def test_rebase_refuses_when_the_user_duplicated_the_edited_line():
    # Found by hypothesis: after the user duplicates a line, an edit of that line could belong
    # to either copy; guessing could change the user's new line instead of the original.
    base = "b = 2\na = 1\n"
    ops = [OffsetEdit(1, 2, "", 0)]
    assert rebase(ops, base, "b = 2\nb = 2\na = 1\n") is None
    assert rebase(ops, base, "b = 2\na = 1\nc = 3\n") is not None  # a unique line stays movable


def test_plan_apply_is_all_or_nothing_and_names_stale_files():
    bases = {A: "a\nb\nc\n", B: "x\ny\n"}
    edits = {A: [OffsetEdit(0, 1, "A", 0)], B: [OffsetEdit(2, 3, "Y", 1)]}
    fresh = plan_apply(edits, bases, dict(bases))
    assert fresh.texts == {A: "A\nb\nc\n", B: "x\nY\n"} and not fresh.rebased
    moved = plan_apply(edits, bases, {A: "a\nb\nc\nd\n", B: "x\ny\n"})
    assert moved.texts[A] == "A\nb\nc\nd\n" and moved.rebased
    stale = plan_apply(edits, bases, {A: "a\nb\nc\n", B: "X\ny\n"})  # B's edited line changed
    assert stale.stale == [B] and stale.texts == {} and not stale.applicable
    closed = plan_apply(edits, bases, {A: "a\nb\nc\n"})
    assert closed.stale == [B]


def test_rebase_refuses_when_the_edited_lines_repeat_overlapping():
    # Found by hypothesis: three equal lines occur once in four equal lines when counted
    # without overlaps, so the edit looked uniquely placed; with overlaps counted it is not.
    base = "a = 1\n" * 4
    ops = [OffsetEdit(0, 13, "", 0)]
    assert rebase(ops, base, "a = 1\n" * 3) is None


def test_a_match_that_overlaps_itself_is_ambiguous():
    with pytest.raises(OpsRejected, match="occurs 2 times"):
        resolve([EditOp("replace", A, "match", "aa", "b")], {A: "aaa"})


def test_rebase_refuses_when_a_repeated_line_leaves_it_unclear_what_the_user_changed():
    # Found by hypothesis: the user deleted the first of two equal lines (which the op edits)
    # and a later line; the texts also read as "deleted the last two lines", which would
    # leave the op's lines untouched. The line after the op's lines settles it: refuse.
    base = "def f():\ndef f():\na = 1\ndef f():\n"
    ops = [OffsetEdit(0, 10, "", 0)]
    assert rebase(ops, base, "def f():\ndef f():\n") is None
