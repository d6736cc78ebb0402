"""The agent's read and list show the workspace's own text only: files inside the folder, never
what git ignores or what lies outside, the editor's unsaved text first, cut to fit and saying so."""

from __future__ import annotations

import os

import pytest

from margin.core.agent.edits import Ledger
from margin.services.agent_reads import WorkspaceReads
from tests.fakes.fake_provider import FakeProvider, close, fake_app


@pytest.fixture
async def reads(tmp_path):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / ".gitignore").write_text(".env\nbuild/\n")
    (root / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("x = 1\n")
    (root / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 2001)))
    (tmp_path / "outside.txt").write_text("secret outside\n")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    app = fake_app(tmp_path, FakeProvider(), [root.as_uri()])
    yield app, WorkspaceReads(app, root.as_uri()), root
    await close(app)


async def test_a_file_is_read_with_its_lines_and_version_and_the_ledger_can_follow(reads):
    _app, tools, _root = reads
    shown = tools.read("./src/calc.py")
    assert shown.ok and shown.text.startswith("src/calc.py lines 1-2 of 2 (sha256:")
    assert shown.text.endswith("def add(a, b):\n    return a + b\n")
    ledger = Ledger()
    ledger.read("src/calc.py", shown.current, shown.start, shown.end)
    assert ledger.edit("src/calc.py", shown.current, "a + b", "b + a").text == "def add(a, b):\n    return b + a\n"


async def test_the_editors_unsaved_text_is_what_is_read(reads):
    app, tools, root = reads
    app.files.open((root / "src" / "calc.py").as_uri(), "python", 3, "def add(a, b):\n    return a + b  # typed\n")
    assert "# typed" in tools.read("src/calc.py").text


@pytest.mark.parametrize("path", [".env", "build/out.py", "link.txt", "../outside.txt", "/etc/passwd", "nothing.py", ""])
async def test_what_is_not_the_projects_own_text_is_never_read(reads, path):
    _app, tools, _root = reads
    shown = tools.read(path)
    assert not shown.ok and "secret" not in shown.text and shown.current is None, shown.text


async def test_a_long_file_is_cut_at_whole_lines_and_says_what_to_read_next(reads):
    _app, tools, _root = reads
    shown = tools.read("big.txt", 10, 1500, max_chars=1000)
    head, *lines = shown.text.splitlines()
    assert head.startswith("big.txt lines 10-") and "did not fit: read them next" in head
    assert lines[0] == "line 10" and (shown.start, shown.end) == (10, 9 + len(lines))
    assert not tools.read("big.txt", 3000).ok


async def test_a_listing_is_what_git_would_show(reads):
    _app, tools, _root = reads
    top = tools.list(".")
    assert top.text == "./ holds 3:\n.gitignore\nbig.txt\nsrc/\n"  # no .env, build/, link.txt
    assert tools.list("src").text == "src/ holds 1:\ncalc.py\n"
    for path in ("build", "..", "/etc", "src/calc.py"):
        assert not tools.list(path).ok, path


async def test_an_empty_file_reads_as_empty_and_can_be_written(reads):
    _app, tools, root = reads
    (root / "src" / "empty.py").write_text("")
    shown = tools.read("src/empty.py")
    assert shown.ok and shown.text.startswith("src/empty.py is empty (sha256:") and shown.current == ""
    ledger = Ledger()
    ledger.read("src/empty.py", shown.current, shown.start, shown.end)
    assert ledger.edit("src/empty.py", "", "", "x = 1\n").text == "x = 1\n"


async def test_search_finds_exact_text_and_related_code_never_in_ignored_files(reads):
    from margin.services.retrieval import Retrieval

    app, tools, root = reads
    (root / "src" / "invoice.py").write_text(
        "def compute_invoice_total(lines, tax_rate):\n    return sum(lines) * (1 + tax_rate)\n")
    (root / "build" / "copy.py").write_text("def compute_invoice_total(): pass\n")  # ignored
    app.files.open((root / "src" / "calc.py").as_uri(), "python", 2, "def add(a, b):\n    return a + b  # invoice\n")
    retrieval = Retrieval(app)
    await retrieval.indexed((root / "src" / "calc.py").as_uri())
    found = (await tools.search("compute_invoice_total", retrieval)).text
    assert found.startswith("Exact text 'compute_invoice_total': 1 places\nsrc/invoice.py:1: def compute_invoice_total(")
    assert "build/" not in found and "Related by its words:\nsrc/invoice.py lines 1-2: def compute_invoice_total" in found
    typed = (await tools.search("# invoice")).text  # the editor's unsaved text
    assert "src/calc.py:2: return a + b  # invoice" in typed
    assert not (await tools.search("  ")).ok
    assert (await tools.search("OPENAI_API_KEY")).text.startswith("Exact text 'OPENAI_API_KEY': nowhere")


async def test_a_missing_file_is_said_with_what_the_nearest_folder_holds(reads):
    """A small model guesses `main.py` and would guess again: it is shown the real names (what git
    would show: never .env or build/)."""
    _app, tools, root = reads
    assert tools.read("main.py").text == "There is no file main.py. ./ holds: .gitignore, big.txt, src/."
    assert tools.read("src/calculator.py").text == "There is no file src/calculator.py. src/ holds: calc.py."
    assert tools.read("src/deep/er/x.py").text == "There is no file src/deep/er/x.py. src/ holds: calc.py."
    assert tools.read("../main.py").text == "../main.py is not a file inside the workspace."
    (root / "many").mkdir()
    for number in range(25):
        (root / "many" / f"m{number:02}.py").write_text("")
    assert tools.read("many/x.py").text.endswith("m18.py, m19.py (and 5 more).")
