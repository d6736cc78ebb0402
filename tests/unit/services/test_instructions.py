"""services.instructions over an in-memory fake of the workspace folder's files
(tests.fakes.workspace): the files found farthest first, read again only when their stamp
changes, the open buffer before the disk, nothing that leads outside the folder, binary files
skipped and large ones read up to MAX_BYTES."""

from __future__ import annotations

import pytest

from margin.services.instructions import MAX_BYTES, InstructionFiles
from tests.fakes.fake_provider import FakeProvider, close, fake_app
from tests.fakes.workspace import FakeFolderFiles, FakeWorkspace

WS = "file:///ws"
ACTIVE = f"{WS}/pkg/deep/x.py"


@pytest.fixture
async def made(tmp_path):
    apps = []

    def make(files: dict[str, str | bytes], **env: str) -> tuple[InstructionFiles, FakeFolderFiles]:
        ws = FakeWorkspace(FakeFolderFiles(files))
        app = fake_app(tmp_path, FakeProvider(), (WS,), workspace_access=ws.access, MARGIN_RETRIEVAL="false", **env)
        apps.append(app)
        return InstructionFiles(app), ws.files

    yield make
    for app in apps:
        await close(app)


def texts(instructions: InstructionFiles, text_document: str | None = ACTIVE) -> dict[str, str]:
    return {found.file_id: found.text for found in instructions.find(text_document)}


def test_the_files_from_the_folder_down_to_the_active_files_farthest_first(made):
    instructions, _ = made({"AGENTS.md": "Root rule.", "pkg/AGENTS.md": "Package rule.", "other/AGENTS.md": "Other.",
                            ".margin/instructions.md": "Margin rule.", "pkg/deep/x.py": "x = 1\n",
                            "pkg/blank/AGENTS.md": "  \n"})
    found = instructions.find(ACTIVE)
    assert [(f.file_id, f.text) for f in found] == [
        ("AGENTS.md", "Root rule."), (".margin/instructions.md", "Margin rule."), ("pkg/AGENTS.md", "Package rule.")]
    assert [f.distance for f in found] == sorted((f.distance for f in found), reverse=True)
    assert texts(instructions, f"{WS}/pkg/blank/y.py") == {  # a blank file is none
        "AGENTS.md": "Root rule.", ".margin/instructions.md": "Margin rule.", "pkg/AGENTS.md": "Package rule."}
    assert texts(instructions, None) == {"AGENTS.md": "Root rule.", ".margin/instructions.md": "Margin rule."}


def test_a_file_is_read_again_only_when_its_stamp_changes(made):
    instructions, files = made({"AGENTS.md": "Rule one."})
    assert texts(instructions) == {"AGENTS.md": "Rule one."}
    assert texts(instructions) == {"AGENTS.md": "Rule one."}
    assert files.reads == ["AGENTS.md"]
    files.write("AGENTS.md", "Rule two, longer.")
    assert texts(instructions) == {"AGENTS.md": "Rule two, longer."}
    files.write("AGENTS.md", "Rule six, longer.", keep_stamp=True)  # the stamp is what is checked
    assert texts(instructions) == {"AGENTS.md": "Rule two, longer."}
    assert files.reads == ["AGENTS.md", "AGENTS.md"]
    files.delete("AGENTS.md")
    assert texts(instructions) == {}


def test_the_open_buffer_is_read_before_the_disk(made):
    instructions, files = made({"AGENTS.md": "Saved rule."})
    instructions.app.files.open(f"{WS}/AGENTS.md", "markdown", 1, "Rule not saved yet.")
    assert texts(instructions) == {"AGENTS.md": "Rule not saved yet."}
    files.delete("AGENTS.md")
    assert texts(instructions) == {"AGENTS.md": "Rule not saved yet."}
    assert files.reads == []


def test_nothing_that_leads_outside_the_folder_is_read(made):
    names = '["AGENTS.md", "../outside/notes.md", "/etc/hostname", "away/AGENTS.md"]'
    instructions, files = made({"AGENTS.md": "Linked elsewhere.", "away/AGENTS.md": "Inside rule.",
                                "etc/hostname": "A file of the folder, named as an absolute path."},
                               MARGIN_INSTRUCTION_FILES=names)
    files.outside.add("AGENTS.md")
    assert texts(instructions) == {"etc/hostname": "A file of the folder, named as an absolute path.",
                                   "away/AGENTS.md": "Inside rule."}
    assert "AGENTS.md" not in files.reads


def test_binary_files_are_skipped_and_large_ones_read_up_to_the_limit(made):
    instructions, _ = made({"AGENTS.md": b"\x89PNG\r\n\0rule",
                            ".github/copilot-instructions.md": "x" * (MAX_BYTES + 10)})
    found = texts(instructions)
    assert "AGENTS.md" not in found
    assert found[".github/copilot-instructions.md"] == "x" * MAX_BYTES
