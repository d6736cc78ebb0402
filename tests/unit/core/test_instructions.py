"""core.instructions: where instruction files are looked for, and how their cap cuts them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.instructions import HEADING, InstructionFile, candidates, fit, folders_between, render, section_text


def words(text: str) -> int:
    return len(text.split())


async def count(texts: list[str]) -> list[int]:
    return [words(t) for t in texts]


def test_folders_from_the_workspace_folder_down_to_the_active_file():
    assert folders_between("src/http/x.py") == ["", "src", "src/http"]
    assert folders_between("x.py") == [""]
    assert folders_between(None) == [""]


def test_bare_names_are_looked_for_in_every_folder_and_paths_only_at_the_root():
    found = candidates(["AGENTS.md", ".github/copilot-instructions.md"], ["", "src", "src/http"])
    assert [(c.file_id, c.distance, c.rank) for c in found] == [
        ("AGENTS.md", 2, 0), (".github/copilot-instructions.md", 2, 1),
        ("src/AGENTS.md", 1, 0), ("src/http/AGENTS.md", 0, 0)]


async def test_everything_fits_and_stays_farthest_first():
    files = [InstructionFile("AGENTS.md", 1, 0, text="a b c"), InstructionFile("src/AGENTS.md", 0, 0, text="d e")]
    kept, cut = await fit(files, 1000, count)
    assert kept == files and cut == []
    assert render(kept).startswith(HEADING) and render(kept).index("a b c") < render(kept).index("d e")


async def test_the_farthest_is_cut_first_and_a_straddler_keeps_its_first_lines():
    near = InstructionFile("src/AGENTS.md", 0, 0, text="near rule")
    far = InstructionFile("AGENTS.md", 1, 0, text="\n".join(f"far rule number {i}" for i in range(40)))
    room = words(HEADING) + 2 + words(section_text(near)) + 2
    kept, cut = await fit([far, near], room + 40, count)
    assert kept[-1] == near and kept[0].file_id == "AGENTS.md"
    assert far.text.startswith(kept[0].text) and len(kept[0].text.splitlines()) == 8  # 4 words a line; 3 for its name, 2 apart
    assert [c.describe() for c in cut] == ["AGENTS.md lines 9-40"]
    kept, cut = await fit([far, near], room + 10, count)  # too little left for a part: cut whole
    assert kept == [near] and [c.describe() for c in cut] == ["AGENTS.md"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 30)), min_size=1, max_size=6),
       st.integers(0, 200))
async def test_never_over_the_cap_and_a_nearer_file_is_never_cut_while_a_farther_one_is_kept(shapes, cap):
    files = [InstructionFile(f"f{i}.md", distance, rank, text="\n".join(f"w{j} x" for j in range(lines)))
             for i, (distance, rank, lines) in enumerate(shapes)]
    kept, cut = await fit(files, cap, count)
    if kept:
        assert words(render(kept)) <= cap
    whole = {f.file_id for f in kept if f in files}
    for file in files:
        if file.file_id in whole:
            nearer = [f for f in files if (f.distance, f.rank) < (file.distance, file.rank)]
            assert all(f in kept for f in nearer), (file, kept)
    assert {c.file_id for c in cut} | {f.file_id for f in kept} == {f.file_id for f in files}
