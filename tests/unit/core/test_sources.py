"""Prompt sources (core.sources): the registry in SPEC D order, and a new kind of context added
with its own module and one registration line — its content in the prompt at its place, within
the budget, cut by its own rule at its priority."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.assemble import assemble_chat
from margin.core.budget import Window
from margin.core.file_block import render_file
from margin.core.sources import registry
from margin.core.sources.base import FileRef, render
from margin.core.sources.snippets import Snippets
from margin.core.tokens.counter import heuristic_count
from margin.core.vfs import VirtualFile
from tests.unit.core.diagnostics_source import DIAGNOSTICS, HEADING
from tests.unit.core.test_assemble import chat_input, ref
from tests.unit.core.test_assemble_memories import history, snippet

SPEC_D_ORDER = ["system", "instructions", "pointers", "history", "summary", "snippets", "files", "memories",
                "optional system", "message"]


@pytest.fixture
def with_diagnostics(monkeypatch):
    """The registration line a new source adds: after the snippets, before the files."""
    at = [source.name for source in registry.SOURCES].index("snippets") + 1
    monkeypatch.setattr(registry, "SOURCES", [*registry.SOURCES[:at], DIAGNOSTICS, *registry.SOURCES[at:]])


def problems(n: int, words: int = 12) -> list[str]:
    return [f"a.py:{i + 1}: error E{i}: " + " ".join(f"name_{i}_{w}" for w in range(words)) for i in range(n)]


def assemble(window: int, **inputs):
    return assemble_chat(chat_input(inputs.pop("history", []), "Why does it fail?", inputs.pop("files", []), **inputs), heuristic_count,
                         Window(window, 200, "heuristic", False))


def test_the_registry_is_walked_in_spec_d_order():
    result = assemble(8000)
    assert [s.name for s in registry.SOURCES] == SPEC_D_ORDER
    assert [s.name for s in result.plan.report().sections] == SPEC_D_ORDER  # no framing counted here


def test_a_new_source_shows_its_content_at_its_place(with_diagnostics):
    result = assemble(8000, files=[ref("a.py", "x = undefined_name\n")], diagnostics=problems(3),
                      snippets=Snippets([snippet("s.py", 5)]))
    assert [s.name for s in result.plan.report().sections] == [*SPEC_D_ORDER[:6], "diagnostics", *SPEC_D_ORDER[6:]]
    prompt = "\n\n".join(m.content for m in result.messages)
    places = [prompt.index(text) for text in ("File s.py lines 1-5", HEADING, *problems(3), "File a.py", "Why does it fail?")]
    assert places == sorted(places)  # after the snippets, before the files and the message, most severe first
    assert result.plan.section("diagnostics").tokens >= heuristic_count("\n".join([HEADING, *problems(3)]))
    assert result.plan.total <= result.plan.limit


def test_a_new_source_is_cut_by_its_own_rule_at_its_priority(with_diagnostics):
    files, found = [ref("a.py", "".join(f"line_{i} = {i}\n" for i in range(40)))], None
    for window in range(700, 3000, 10):  # the smallest window that keeps some of the problems
        result = assemble(window, files=files, history=history(6, 20), diagnostics=problems(8))
        kept = result.plan.section("diagnostics")
        if not result.over_budget and kept.kept and kept.dropped_items:
            found = result
            break
    assert found is not None, "no window cut some problems and kept others"
    diagnostics = found.plan.section("diagnostics")
    assert [item.payload for item in diagnostics.kept][::-1] == problems(len(diagnostics.kept))  # the least severe went
    assert {d.reason for d in diagnostics.dropped} == {"less severe than the problems kept"}
    assert found.plan.section("files").kept and not found.plan.section("files").dropped_items  # cut after it
    history_cut = found.plan.section("history")
    assert len(history_cut.kept) == 2 and history_cut.dropped_items  # cut before it: down to the kept exchanges
    assert found.plan.total <= found.plan.limit
    prompt = "\n\n".join(m.content for m in found.messages)
    assert problems(8)[-1] not in prompt and problems(8)[0] in prompt


@settings(max_examples=40, deadline=None)
@given(window=st.integers(600, 6000), count=st.integers(0, 12), words=st.integers(1, 40), turns=st.integers(0, 12))
def test_a_new_source_never_takes_the_prompt_over_the_limit(window, count, words, turns):
    with pytest.MonkeyPatch.context() as patch:
        at = [source.name for source in registry.SOURCES].index("snippets") + 1
        patch.setattr(registry, "SOURCES", [*registry.SOURCES[:at], DIAGNOSTICS, *registry.SOURCES[at:]])
        result = assemble(window, history=history(turns, 20), diagnostics=problems(count, words))
    if result.over_budget:
        assert result.messages == []
        return
    assert result.plan.total <= result.plan.limit
    assert result.messages[-1].content.endswith("Why does it fail?")  # the required message is whole
    kept = [item.payload for item in result.plan.section("diagnostics").kept][::-1]
    assert kept == problems(count, words)[: len(kept)]  # only the least severe are ever cut


def test_a_file_block_is_rendered_once_for_its_id_language_and_text():
    """Request overhead (#24): the block is kept, the same string each time, and is exactly the
    file's rendering; a changed text, id or language is a new block."""
    def block(file_id: str, text: str, language: str = "python") -> str:
        return render(FileRef(VirtualFile(f"file:///ws/{file_id}", language, 1, text), file_id))

    first = block("a.py", "x = 1\n")
    assert first == render_file("a.py", "python", VirtualFile("u", "python", 1, "x = 1\n").fingerprint, "x = 1\n")
    assert block("a.py", "x = 1\n") is first
    assert block("a.py", "x = 2\n") != first
    assert block("b.py", "x = 1\n").startswith("File b.py ")
    assert block("a.py", "x = 1\n", "text").startswith("File a.py (text, ")
