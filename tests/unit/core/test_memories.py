"""The rules of a memory, and the orders memories are shown in."""

from __future__ import annotations

import pytest

from margin.core.memories import (
    MAX_TEXT_CHARS,
    InvalidMemory,
    Memory,
    checked,
    for_prompt,
    memory_scope,
    memory_text,
    newest_first,
)


def test_text_is_stripped_non_empty_and_bounded():
    assert memory_text("  we use pytest\n") == "we use pytest"
    assert memory_text("😀" * MAX_TEXT_CHARS) == "😀" * MAX_TEXT_CHARS  # characters, not bytes
    with pytest.raises(InvalidMemory, match="needs some text"):
        memory_text(" \t\n")
    with pytest.raises(InvalidMemory) as caught:
        memory_text("x" * 2345)
    assert "at most 2,000 characters; this one has 2,345" in str(caught.value)
    assert "split it into several memories" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_scope_is_workspace_or_global():
    assert memory_scope("workspace") == "workspace" and memory_scope("global") == "global"
    with pytest.raises(InvalidMemory, match="\"workspace\" .* or \"global\" .*not 'Global'"):
        memory_scope("Global")


def test_a_global_memory_has_no_workspace_and_a_workspace_memory_needs_one():
    assert checked(" a ", "global", "file:///ws") == ("a", "global", "")
    assert checked("a", "workspace", "file:///ws") == ("a", "workspace", "file:///ws")
    with pytest.raises(InvalidMemory, match="no workspace folder.*scope \"global\""):
        checked("a", "workspace", "")


def test_which_workspaces_a_memory_applies_in():
    local = Memory("1", "a", "workspace", "file:///ws", 1.0)
    everywhere = Memory("2", "b", "global", "", 2.0)
    assert local.applies_in("file:///ws") and not local.applies_in("file:///other")
    assert everywhere.applies_in("file:///other") and everywhere.applies_in("")


def test_lists_show_the_newest_first_and_prompts_the_oldest_first():
    memories = [Memory("9", "c", "global", "", 5.0), Memory("10", "d", "global", "", 5.0),
                Memory("2", "a", "global", "", 1.0)]
    assert [m.text for m in newest_first(memories)] == ["d", "c", "a"]  # ids (as numbers) break ties
    assert [m.text for m in for_prompt(memories)] == ["a", "c", "d"]
