"""The budget engine: properties over random prompts, and the rules in concrete cases."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.budget import (
    Dropped,
    Item,
    Section,
    SectionReport,
    SystemPromptTooLarge,
    Window,
    plan,
    safety_margin,
    system_prompt_warning,
)
from margin.core.tokens.counter import heuristic_count
from margin.core.trim import line_trimmer

CUT_ORDER = ["prefix", "history", "summary", "context", "optional"]


def items(prefix: str, sizes: list[int]) -> tuple[Item, ...]:
    return tuple(Item(f"{prefix}{i}", size) for i, size in enumerate(sizes))


sizes = st.lists(st.integers(1, 400), max_size=8)


@st.composite
def prompts(draw):
    prefix_lines = draw(st.lists(st.text("abc def(x):+-*/ ", min_size=0, max_size=60), max_size=30))
    prefix_text = "".join(line + "\n" for line in prefix_lines)
    count = heuristic_count
    sections = [
        Section("system", items("system", [draw(st.integers(1, 300))]), required=True, is_system=True),
        Section("prefix", (Item("prefix", count(prefix_text)),), share=draw(st.sampled_from([0, 0.2, 0.3])),
                trimmer=line_trimmer(prefix_text, "end", count), drop_reason="trimmed to fit"),
        Section("history", items("turn", draw(sizes)), share=draw(st.sampled_from([0, 0.4])),
                protect_last=draw(st.integers(0, 2)), drop_reason="older than the kept history"),
        Section("summary", items("summary", draw(st.lists(st.integers(1, 300), max_size=1))), share=0.1),
        Section("context", items("file", draw(sizes)), share=draw(st.sampled_from([0, 0.3]))),
        Section("optional", items("fragment", draw(st.lists(st.integers(1, 100), max_size=3)))),
        Section("newest", items("newest", [draw(st.integers(1, 500))]), required=True),
    ]
    window = draw(st.integers(600, 6000))
    output = draw(st.integers(0, window // 3))
    return sections, window, output


def run(sections, window, output):
    return plan(sections, Window(window, output, "heuristic", False, 5))


def floors(sections, result):
    available = result.limit - result.required_tokens
    shares = sum(s.share for s in sections if not s.required)
    out = {}
    for s in sections:
        if s.required:
            continue
        reserved = int(available * s.share / shares) if shares else 0
        protected = sum(i.tokens for i in s.items[len(s.items) - s.protect_last:]) if s.protect_last else 0
        out[s.name] = max(reserved, protected)
    return out


@settings(max_examples=400, deadline=None)
@given(prompts())
def test_plan_properties(prompt):
    sections, window, output = prompt
    result = run(sections, window, output)
    again = run(sections, window, output)
    assert result.report() == again.report()  # same input, same output

    required = {s.name: sum(i.tokens for i in s.items) for s in sections if s.required}
    for name, tokens in required.items():  # the system prompt and newest message are whole
        assert result.section(name).tokens == tokens and not result.section(name).dropped

    if result.over_budget:
        assert result.required_tokens > result.limit
        assert all(result.section(n).tokens == 0 for n in CUT_ORDER)
        return
    assert result.total <= result.limit  # never over the budget

    need = {s.name: sum(i.tokens for i in s.items) for s in sections if not s.required}
    kept = {n: result.section(n).tokens for n in CUT_ORDER}
    if sum(need.values()) + result.required_tokens <= result.limit:
        assert kept == need  # nothing is cut when everything fits
    floor = floors(sections, result)
    for later_index, later in enumerate(CUT_ORDER):
        assert kept[later] <= need[later]  # borrowing never gives more than a section needs
        if kept[later] < need[later]:
            # Whatever a later section lost, every section before it in the cut order had
            # already given all it could beyond its floor (items go whole, so a section may
            # stop above its floor when its next item would take it below)...
            for earlier in CUT_ORDER[:later_index]:
                next_item = result.section(earlier).kept[0].tokens if result.section(earlier).kept else 0
                assert (kept[earlier] <= floor[earlier] or kept[earlier] == 0
                        or (earlier != "prefix" and kept[earlier] - next_item < floor[earlier])), (earlier, later)
        if kept[later] < min(floor[later], need[later]):
            # ...and a section is cut into its share only once no section before it holds
            # more than its own share.
            for earlier in CUT_ORDER[:later_index]:
                assert kept[earlier] <= floor[earlier], (earlier, later)

    for s in sections:  # dropped items go in the section's order: the kept ones are the newest
        if not s.required and s.trimmer is None:
            kept_ids = [i.id for i in result.section(s.name).kept]
            assert kept_ids == [i.id for i in s.items[len(s.items) - len(kept_ids):]]


def history_case(window: int, turns: list[int], **section_args):
    sections = [
        Section("system", items("system", [100]), required=True, is_system=True),
        Section("history", items("turn", turns), drop_reason="older than the kept history", **section_args),
        Section("newest", items("newest", [50]), required=True),
    ]
    return plan(sections, Window(window, 100, "t", True), margin=0)


def test_oldest_whole_turns_are_dropped_first_with_reasons():
    result = history_case(600, [100, 100, 100, 100, 100])  # 350 available for 500 of history
    history = result.section("history")
    assert [i.id for i in history.kept] == ["turn2", "turn3", "turn4"]
    assert [(d.item, d.reason) for d in history.dropped] == [
        ("turn0", "older than the kept history"), ("turn1", "older than the kept history")]
    assert result.report().sections[1] == SectionReport(
        "history", 300, 3, (Dropped("turn0", "older than the kept history"),
                            Dropped("turn1", "older than the kept history")))


def test_protected_recent_exchanges_go_only_when_nothing_else_can():
    sections = [
        Section("system", items("system", [100]), required=True, is_system=True),
        Section("history", items("turn", [100, 100, 100]), protect_last=2),
        Section("context", items("file", [150, 150])),
        Section("newest", items("newest", [50]), required=True),
    ]
    result = plan(sections, Window(700, 100, "t", True), margin=0)
    # 450 available, 600 needed: history gives turn0 (100), then context gives a file (150),
    # and the two protected turns survive even though history comes first in the cut order.
    assert [i.id for i in result.section("history").kept] == ["turn1", "turn2"]
    assert [i.id for i in result.section("context").kept] == ["file1"]
    tight = plan(sections, Window(420, 100, "t", True), margin=0)
    # 170 available: the first pass empties context; the second pass cuts into the protected turns.
    assert tight.section("context").tokens == 0
    assert [i.id for i in tight.section("history").kept] == ["turn2"]


def test_share_is_reserved_and_unused_share_is_borrowed():
    def sections(context_sizes):
        return [
            Section("system", items("system", [100]), required=True, is_system=True),
            Section("history", items("turn", [100] * 8), share=0.5),
            Section("context", items("file", context_sizes), share=0.5),
            Section("newest", items("newest", [100]), required=True),
        ]
    # 800 available: each share is 400. Context needs 600 > its share, history 800 > its share:
    # history is cut first, but only down to its share; then context is cut to fit.
    both = plan(sections([300, 300]), Window(1100, 100, "t", True), margin=0)
    assert both.section("history").tokens == 400 and both.section("context").tokens == 300
    # Context needs only 100 of its 400: history borrows the other 300.
    lending = plan(sections([100]), Window(1100, 100, "t", True), margin=0)
    assert lending.section("context").tokens == 100 and lending.section("history").tokens == 700


def test_prefix_is_trimmed_line_aligned_before_history_is_touched():
    text = "".join(f"line {i} = value_{i}\n" for i in range(40))
    trimmer = line_trimmer(text, "end", heuristic_count)
    sections = [
        Section("system", items("system", [50]), required=True, is_system=True),
        Section("prefix", (Item("prefix", heuristic_count(text)),), trimmer=trimmer, drop_reason="trimmed to fit"),
        Section("history", items("turn", [60, 60])),
        Section("newest", items("newest", [20]), required=True),
    ]
    result = plan(sections, Window(400, 50, "h", False), margin=0)
    prefix = result.section("prefix")
    assert prefix.trimmed.text and text.endswith(prefix.trimmed.text)
    assert prefix.trimmed.text.startswith("line ") and prefix.trimmed.text.count("\n") < 40
    assert prefix.dropped[0].item.endswith("lines") and prefix.tokens == heuristic_count(prefix.trimmed.text)
    assert result.section("history").tokens == 120 and result.total <= result.limit


def test_suffix_keeps_the_first_lines():
    text = "a = 1\nb = 2\nc = 3\n"
    trimmed = line_trimmer(text, "start", heuristic_count)(heuristic_count("a = 1\nb = 2\n"))
    assert trimmed.text == "a = 1\nb = 2\n" and trimmed.dropped_lines == 1


def test_long_runs_of_dropped_items_are_reported_as_one_entry():
    result = history_case(400, [10] * 40)  # 150 available for 400 of history
    history = result.section("history")
    assert len(history.dropped) == 25 and history.tokens == 150 and len(history.kept) == 15
    assert result.report().sections[1].dropped == (
        Dropped("turn0 … turn24 (25 items)", "older than the kept history"),)


def test_required_parts_that_do_not_fit_are_over_budget_with_sizes():
    sections = [
        Section("system", items("system", [100]), required=True, is_system=True),
        Section("history", items("turn", [10])),
        Section("newest", items("newest", [900]), required=True),
    ]
    result = plan(sections, Window(1000, 100, "t", True), margin=0)
    assert result.over_budget is not None
    assert "need 1000 tokens (newest 900, system 100), but only 900 fit" in result.over_budget
    assert result.section("history").dropped[0].reason == "the required parts alone do not fit"


def test_system_prompt_that_cannot_fit_fails_loudly_with_sizes():
    with pytest.raises(SystemPromptTooLarge) as caught:
        plan([Section("system", items("s", [5000]), required=True, is_system=True)], Window(4096, 1024, "t", True))
    assert "5000 tokens" in str(caught.value) and "4096" in str(caught.value)


def test_system_prompt_warning_above_a_quarter_of_the_window():
    assert system_prompt_warning(1000, 4096) is None
    assert "1100 tokens, 27%" in system_prompt_warning(1100, 4096)


def test_safety_margin_is_larger_when_counting_is_approximate():
    assert safety_margin(4096, True) < safety_margin(4096, False)
    assert safety_margin(4096, True) == 82 + 8
