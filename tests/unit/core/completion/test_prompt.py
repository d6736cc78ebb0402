"""The budget of an inline completion: what of the code around the cursor and of the extra
snippets is sent, counted with a real tokenizer."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from margin.core.budget import Window
from margin.core.completion.prompt import (
    CONTEXT_CHARS_PER_TOKEN,
    EXTRA_SHARE,
    FAR_FROM_CURSOR,
    LOW_PRIORITY,
    PREFIX_SHARE,
    SUFFIX_SHARE,
    CompletionInput,
    CompletionPrompt,
    Snippet,
    assemble_completion,
    plain_snippet,
    within_reach,
)
from margin.core.tokens.local import tiktoken_counter

O200K = tiktoken_counter("o200k_base")
count = O200K.count
CUTS = pytest.mark.parametrize("cuts", [None, O200K.line_cuts], ids=["whole counts", "safe cuts"])
"""Both ways of counting the code: its lines summed and what is kept counted whole, and pieces cut
where the tokenizer must split, whose counts add up exactly"""


def assemble(input: CompletionInput, window: int, *, reserved: int = 64, fixed: int = 0, framing: int = 0,
             counter=count, cuts=None) -> CompletionPrompt:
    return assemble_completion(input, counter,
                               Window(window, reserved, "tiktoken:o200k_base", True, framing),
                               fixed_tokens=fixed, cuts=cuts)


def numbered(name: str, n: int, start: int = 0) -> str:
    return "".join(f"{name}_{i} = compute({i}, '{name}')\n" for i in range(start, start + n))


def sent_tokens(result: CompletionPrompt, fixed: int = 0, framing: int = 0) -> int:
    """What the plan accounts for, each part counted on its own by the real tokenizer."""
    return (fixed + framing + count(result.lines_before) + count(result.cursor_line) + count(result.suffix)
            + sum(count(plain_snippet(s)) for s in result.extra))


def available(result: CompletionPrompt) -> int:
    return result.plan.limit - result.plan.required_tokens


# --- examples ------------------------------------------------------------------------------

def test_everything_is_sent_when_it_fits():
    extra = (Snippet("b.py", "def helper():\n    return 1\n", "open file"),)
    input = CompletionInput("a.py", "python", "import os\n\ndef f():\n    return os.", "path\n\nf()\n", extra)
    result = assemble(input, 4096)
    assert result.over_budget is None
    assert (result.prefix, result.suffix, result.extra) == (input.prefix, input.suffix, extra)
    assert result.cursor_line == "    return os."
    assert result.lines_before == "import os\n\ndef f():\n"
    assert (result.file_id, result.language) == ("a.py", "python")
    report = result.plan.report()
    assert [s.name for s in report.sections] == ["format", "cursor line", "extra", "suffix", "prefix"]
    assert all(not s.dropped for s in report.sections)


@CUTS
def test_the_far_lines_go_first_and_the_cursor_line_stays_whole(cuts):
    before, after = numbered("before", 300), numbered("after", 300)
    line = "    total = "
    result = assemble(CompletionInput("a.py", "python", before + line, "1\n" + after), 1024, cuts=cuts)
    assert result.over_budget is None
    assert result.prefix.endswith("before_299 = compute(299, 'before')\n" + line)
    assert "before_0 =" not in result.prefix
    assert result.suffix.startswith("1\nafter_0 = compute(0, 'after')\n") and "after_299" not in result.suffix
    assert (before + line).endswith(result.prefix) and ("1\n" + after).startswith(result.suffix)
    prefix_report = result.plan.report().section("prefix")
    assert prefix_report.dropped[0].reason == FAR_FROM_CURSOR
    kept_lines = result.lines_before.count("\n")
    assert prefix_report.dropped[0].item == f"{300 - kept_lines} lines"
    assert sent_tokens(result) <= result.plan.limit


def test_the_shares_hold_when_every_section_wants_more():
    extra = tuple(Snippet(f"m{i}.py", numbered(f"m{i}", 4), "open file") for i in range(12))
    input = CompletionInput("a.py", "python", numbered("b", 400), numbered("a", 400), extra)
    result = assemble(input, 2048)
    room = available(result)
    tokens = {name: result.plan.section(name).tokens for name in ("prefix", "suffix", "extra")}
    assert tokens["prefix"] >= PREFIX_SHARE * room - 40  # whole lines: within a line of the share
    assert tokens["suffix"] >= SUFFIX_SHARE * room - 40
    assert 0 < tokens["extra"] <= EXTRA_SHARE * room + max(count(plain_snippet(s)) for s in extra)
    assert sum(tokens.values()) <= room


def test_extra_snippets_are_dropped_whole_the_last_in_the_list_first():
    extra = tuple(Snippet(f"m{i}.py", numbered(f"m{i}", 12), "recently edited") for i in range(5))
    input = CompletionInput("a.py", "python", numbered("b", 400), numbered("a", 400), extra)
    result = assemble(input, 2048)
    kept = len(result.extra)
    assert 0 < kept < 5 and result.extra == extra[:kept]
    dropped = result.plan.report().section("extra").dropped
    assert [d.item for d in dropped] == [f"m{i}.py (recently edited)" for i in reversed(range(kept, 5))]
    assert {d.reason for d in dropped} == {LOW_PRIORITY}


def test_snippets_too_large_for_their_share_leave_it_to_the_code():
    extra = tuple(Snippet(f"m{i}.py", numbered(f"m{i}", 60), "open file") for i in range(3))
    input = CompletionInput("a.py", "python", numbered("b", 400), numbered("a", 400), extra)
    result = assemble(input, 2048)
    assert result.extra == ()
    room = available(result)
    assert result.plan.section("prefix").tokens > (PREFIX_SHARE + EXTRA_SHARE) * room - 40
    assert sent_tokens(result) <= result.plan.limit
    assert [d.item for d in result.plan.report().section("extra").dropped] == \
        ["m2.py (open file)", "m1.py (open file)", "m0.py (open file)"]


def test_a_share_not_needed_is_lent_to_the_prefix_first():
    before = numbered("b", 1000)
    alone = assemble(CompletionInput("a.py", "python", before, ""), 1024)
    room = available(alone)
    assert alone.plan.section("prefix").tokens > 0.95 * room  # the suffix's and extra's shares too
    both = assemble(CompletionInput("a.py", "python", before, numbered("a", 1000)), 1024)
    assert both.plan.section("prefix").tokens > (PREFIX_SHARE + EXTRA_SHARE) * room - 40
    assert both.plan.section("suffix").tokens <= SUFFIX_SHARE * room


def test_a_cursor_line_too_long_for_the_window_is_over_budget_and_nothing_is_kept():
    result = assemble(CompletionInput("a.js", "javascript", "a\n" + "x = 1; " * 2000, "b\n"), 1024)
    assert result.over_budget and "Too large to send" in result.over_budget
    assert (result.prefix, result.suffix, result.extra) == ("", "", ())


def test_a_cursor_line_of_megabytes_is_read_from_its_end_and_counted_within_a_bound():
    """A minified bundle's one line: only its end before the cursor is read, as if the line began
    there; what is counted stays bounded (here the characters every count call was given)."""
    counted: list[int] = []

    def tallied(text: str) -> int:
        counted.append(len(text))
        return count(text)

    bundle = "function(a,b){return a+b};" * 400_000  # 10.4 MB on one line
    result = assemble(CompletionInput("app.min.js", "javascript", "// header\n" + bundle, bundle + "\n"), 4096,
                      counter=tallied)
    assert sum(counted) <= 2 * 4096 * 12, sum(counted)
    assert not result.over_budget and result.lines_before == ""
    assert bundle.endswith(result.cursor_line) and 0 < len(result.cursor_line) <= 2 * (4096 - 64)
    assert result.suffix == ""  # the rest of the line lies beyond the reach


def test_the_format_tokens_are_required():
    input = CompletionInput("a.py", "python", numbered("b", 400), numbered("a", 400))
    cheap, costly = assemble(input, 1024), assemble(input, 1024, fixed=300)
    assert costly.plan.section("format").tokens == 300
    assert len(costly.prefix) < len(cheap.prefix)
    assert sent_tokens(costly, fixed=300) <= costly.plan.limit
    assert assemble(input, 1024, fixed=1000).over_budget


@CUTS
def test_a_3000_line_file_fits_a_1024_window_and_is_not_counted_whole(cuts):
    lines = [f"    value_{i} = transform(data[{i}], scale={i % 7})\n" for i in range(3000)]
    text = "".join(lines)
    cut = len("".join(lines[:1500]))
    seen: list[int] = []

    def counting(piece: str) -> int:
        seen.append(len(piece))
        return count(piece)

    input = CompletionInput("big.py", "python", text[:cut] + "    result = ", text[cut:])
    result = assemble(input, 1024, reserved=128, counter=counting, cuts=cuts)
    assert result.over_budget is None
    assert sent_tokens(result) <= result.plan.limit <= 1024 - 128
    assert result.prefix.endswith(lines[1499] + "    result = ") and result.suffix.startswith(lines[1500])
    reach = (1024 - 128) * CONTEXT_CHARS_PER_TOKEN
    assert max(seen) <= reach + len("    result = ") and max(seen) < len(text) // 5
    report = result.plan.report()
    assert report.section("prefix").dropped[0].item == f"{1500 - result.lines_before.count(chr(10))} lines"
    assert report.section("suffix").dropped[0].item == f"{1500 - result.suffix.count(chr(10))} lines"


@CUTS
def test_typing_along_a_line_leaves_the_rest_of_the_prompt_unchanged(cuts):
    before, after = numbered("b", 1000), numbered("a", 1000)
    typed = "    result = compute_total(values"
    results = [assemble(CompletionInput("a.py", "python", before + typed[:n], "\n" + after), 1024, cuts=cuts)
               for n in range(4, len(typed) + 1)]
    assert {(r.lines_before, r.suffix, r.extra) for r in results} == {(results[0].lines_before,
                                                                       results[0].suffix, ())}
    assert [r.cursor_line for r in results] == [typed[:n] for n in range(4, len(typed) + 1)]


def test_reach_keeps_whole_lines_nearest_the_cursor():
    assert within_reach("aa\nbb\ncc\n", "dd\nee\nff", 6) == ("bb\ncc\n", "dd\nee\n")
    assert within_reach("aa\nbb\n", "dd\nee", 100) == ("aa\nbb\n", "dd\nee")
    assert within_reach("aaaaaa\n", "bbbbbbb\n", 3) == ("", "")


# --- properties ----------------------------------------------------------------------------

_line = st.text(alphabet="ab (){}:=\t é/", max_size=30)


@CUTS
@settings(max_examples=80, deadline=None)
@given(before=st.lists(_line, max_size=60), typed=_line, rest=_line, after=st.lists(_line, max_size=60),
       extra=st.lists(st.tuples(st.sampled_from(["x.py", "y.py"]), st.lists(_line, max_size=8)), max_size=4),
       window=st.integers(min_value=120, max_value=1500), reserved=st.integers(min_value=8, max_value=128),
       fixed=st.integers(min_value=0, max_value=40), framing=st.integers(min_value=0, max_value=8))
def test_what_is_kept_fits_and_is_the_lines_nearest_the_cursor(cuts, before, typed, rest, after, extra, window,
                                                                reserved, fixed, framing):
    prefix = "".join(line + "\n" for line in before) + typed
    suffix = rest + "".join("\n" + line for line in after)
    snippets = tuple(Snippet(name, "\n".join(lines), "open file") for name, lines in extra)
    input = CompletionInput("a.py", "python", prefix, suffix, snippets)
    result = assemble(input, window, reserved=reserved, fixed=fixed, framing=framing, cuts=cuts)
    again = assemble(input, window, reserved=reserved, fixed=fixed, framing=framing, cuts=cuts)
    assert (again.prefix, again.suffix, again.extra, again.plan.report()) == \
        (result.prefix, result.suffix, result.extra, result.plan.report())  # deterministic
    if result.over_budget:
        assert fixed + framing + count(typed) > result.plan.limit
        return
    assert result.cursor_line == typed  # never cut
    assert prefix.endswith(result.prefix)  # the last lines of the prefix …
    start = len(prefix) - len(result.prefix)
    assert start == 0 or prefix[start - 1] == "\n"  # … whole lines
    assert suffix.startswith(result.suffix)  # the first lines of the suffix …
    assert result.suffix in ("", suffix) or result.suffix.endswith("\n")  # … whole lines
    assert result.extra == snippets[:len(result.extra)]  # the lowest priority went first
    assert result.plan.total <= result.plan.limit
    assert sent_tokens(result, fixed, framing) <= result.plan.limit
    whole = fixed + framing + count(result.prefix) + count(result.suffix) + \
        sum(count(plain_snippet(s)) for s in result.extra)
    assert whole <= result.plan.limit  # counted whole by the real tokenizer
    if cuts is not None:  # the plan's counts of the code are its exact counts, not estimates
        assert result.plan.section("prefix").tokens == count(result.lines_before)
        assert result.plan.section("suffix").tokens == count(result.suffix)


@CUTS
@settings(max_examples=40, deadline=None)
@given(before=st.lists(_line, min_size=1, max_size=80), window=st.integers(min_value=150, max_value=800))
@example(before=[":/:=é(=a:/:=::=éé", "/::=é(=a:/:=::=éé", ":/:=é(=a:/:=::=é"], window=150)
def test_with_no_suffix_the_prefix_may_use_the_suffix_share(cuts, before, window):
    prefix = "".join(line + "\n" for line in before) + "x = "
    alone = assemble(CompletionInput("a.py", "python", prefix, ""), window, cuts=cuts)
    with_suffix = assemble(CompletionInput("a.py", "python", prefix, "y\n" * 400), window, cuts=cuts)
    if alone.over_budget or with_suffix.over_budget:
        return
    assert alone.plan.section("prefix").tokens >= with_suffix.plan.section("prefix").tokens
    code = "".join(line + "\n" for line in before)
    needed = count(code)
    room = available(alone)
    # What goes at once: a line, or with safe cuts a piece, which may hold several lines when
    # the tokenizer need not split between them (the example: two lines of punctuation, one
    # piece of 30 tokens, go together for a shortfall of one token).
    units = cuts.pieces(code) if cuts is not None else [line + "\n" for line in before]
    longest = max(count(unit) for unit in units)
    assert alone.plan.section("prefix").tokens >= min(needed, room) - longest - 1


# --- the trimmer: few whole counts, the same answer -------------------------------------------

CODE_LINES = st.lists(st.sampled_from(["", "\n", "    x = 1\n", "def f(a, b):\n", "        return a + b  # sum\n",
                                       "}\n", "\t\tif (x) {\n", "    \n", "word " * 9 + "\n", "😀 = '''\n"]),
                      max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(CODE_LINES, st.sampled_from(["start", "end"]), st.integers(0, 300), st.floats(0.5, 2.0))
def test_code_lines_trim_keeps_whole_lines_within_the_allowance_by_their_line_counts(text, keep, allowance, ratio):
    """CodeLines keeps the lines nearest the cursor that its one-by-one line counts allow, checked
    with one count of the whole: counted exactly, never over the allowance, never more than the
    plain trimmer (one whole count per line moved) keeps, and never fewer than the line counts
    allow."""
    from margin.core.completion.prompt import CodeLines
    from margin.core.trim import line_trimmer

    expected = line_trimmer(text, keep, count)(allowance)
    lines = CodeLines(text, keep, count, ratio)
    got = lines.trim(allowance)
    assert got.tokens == count(got.text) <= allowance
    assert (text.endswith(got.text) if keep == "end" else text.startswith(got.text))
    kept = len(lines.units) - got.dropped_lines
    assert kept <= len(lines.units) - expected.dropped_lines
    by_lines = lines._lines_for(allowance)
    if count(lines.join(by_lines)) <= allowance:  # the usual case: what the line counts allow
        assert kept == by_lines
    assert lines.trim(allowance) == got and CodeLines(text, keep, count, 1.0).trim(allowance) == got  # deterministic


CUT_CODE = st.lists(st.sampled_from(["", "\n", "    x = 1\n", "def f(a, b):\n", "}\n", "// note\n", "\t// tab\n",
                                     "    \n", "/* c */\n", "\r\n", "word " * 9 + "\n", "😀 = '''\n"]),
                    max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(CUT_CODE, st.sampled_from(["start", "end"]), st.integers(0, 300))
def test_code_lines_with_safe_cuts_keep_the_most_that_fits_with_no_count_of_the_whole(text, keep, allowance):
    """With the tokenizer's safe cuts, CodeLines sizes and trims the code from its pieces' counts
    alone: the size is the exact count of the whole, what is kept is counted exactly and fits, one
    more piece would not, and nothing longer than a piece is ever tokenized."""
    from margin.core.completion.prompt import CodeLines

    longest = max((len(piece) for piece in O200K.line_cuts.pieces(text)), default=0)
    seen: list[int] = []

    def counting(piece: str) -> int:
        seen.append(len(piece))
        return count(piece)

    lines = CodeLines(text, keep, counting, cuts=O200K.line_cuts)
    assert lines.size(allowance) == count(text)
    got = lines.trim(allowance)
    assert got.tokens == count(got.text) <= allowance
    assert (text.endswith(got.text) if keep == "end" else text.startswith(got.text))
    kept = len(got.text) and (got.text.count("\n") + (not got.text.endswith("\n")))
    assert got.dropped_lines == (len(text) and text.count("\n") + (not text.endswith("\n"))) - kept
    n = lines.units.__len__() and lines._lines_for(allowance)
    if n < len(lines.units):
        assert count(lines.join(n + 1)) > allowance  # the next piece nearer the far end does not fit
    assert max(seen, default=0) <= longest


@pytest.mark.parametrize("recent", [False, True], ids=["alone", "with recent code"])
def test_with_safe_cuts_the_assembly_never_counts_a_side_of_the_cursor_whole(recent):
    """Given safe cuts, assemble_completion sizes and trims both sides from the pieces' counts,
    with or without the recent-code cache (each call path once passed the cuts where the ratio
    goes, and quietly counted whole)."""
    from margin.core.completion.prompt import RecentCode

    before, after = numbered("a", 300) + "/x = 1\n" * 3, "y = 2\n" + numbered("b", 300)
    longest = max(len(piece) for piece in O200K.line_cuts.pieces(before + after))
    seen: list[int] = []

    def counting(text: str) -> int:
        seen.append(len(text))
        return count(text)

    result = assemble_completion(CompletionInput("a.py", "python", before + "z = ", after), counting,
                                 Window(600, 64, "tiktoken:o200k_base", True),
                                 cuts=O200K.line_cuts, recent=RecentCode() if recent else None)
    assert not result.over_budget and result.prefix and result.suffix
    assert result.plan.section("prefix").tokens == count(result.lines_before)
    assert result.plan.section("suffix").tokens == count(result.suffix)
    assert max(seen) <= longest  # only pieces were counted, never a side whole
