"""Project instruction files ("core memories") through the real margin-lsp process: found from
the workspace folder down to the active file's folder, shown in the system prompt farthest
first, capped with the farthest cut first and named in the budget report, read from the open
buffer or from disk as it is now, and never from outside the workspace."""

from __future__ import annotations

import os
from pathlib import Path

from tests.e2e.lsp_client import margin_client, open_doc, request
from tests.fakes.fake_openai import reply


def env(fake, tmp_path, **extra):
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
            "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", "MARGIN_RETRIEVAL": "false", **extra}


def workspace(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "ws"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


async def explain(client, root: Path, active: str) -> dict:
    return await request(client, "margin/explain", {"message": "what now?", "textDocument": {"uri": (root / active).as_uri()}})


def instructions_of(result: dict) -> dict:
    return next(s for s in result["budget"]["sections"] if s["name"] == "instructions")


async def test_instruction_files_from_the_root_down_to_the_active_folder_nearest_last(fake, tmp_path):
    root = workspace(tmp_path, {
        "AGENTS.md": "Root rule: use tabs.",
        "pkg/AGENTS.md": "Package rule: no print calls.",
        "pkg/deep/x.py": "x = 1\n",
        "other/AGENTS.md": "Other folder's rule: never shown here.",
        ".github/copilot-instructions.md": "Copilot rule: type hints everywhere.",
        ".margin/instructions.md": "Margin rule: answer in English.",
        "pkg/deep/.github/copilot-instructions.md": "A path with a slash is only read at the root.",
    })
    async with margin_client(env=env(fake, tmp_path), root=root) as client:
        result = await explain(client, root, "pkg/deep/x.py")
        system = result["messages"][0]["content"]
        order = [system.find(text) for text in ("Root rule", "Margin rule", "Copilot rule", "Package rule")]
        assert -1 not in order and order == sorted(order), order  # farthest first, by the setting's order
        assert "Other folder" not in system and "only read at the root" not in system
        assert "Instructions from pkg/AGENTS.md:\nPackage rule: no print calls." in system
        section = instructions_of(result)
        assert section["kept"] == 4 and section["tokens"] > 0 and section["dropped"] == []

        fake.script(reply("ok"))  # and a chat sends exactly that system prompt
        await request(client, "margin/chat", {"message": "hi", "textDocument": {"uri": (root / "pkg/deep/x.py").as_uri()}})
        assert fake.requests[-1]["messages"][0]["content"] == system


async def test_over_the_cap_the_farthest_files_are_cut_first_and_named(fake, tmp_path):
    long_root = "\n".join(f"Root rule {i}: keep functions under {i + 10} lines." for i in range(60))
    root = workspace(tmp_path, {"AGENTS.md": long_root, "pkg/AGENTS.md": "Nearest rule: no globals.",
                                "pkg/x.py": "x = 1\n"})
    async with margin_client(env=env(fake, tmp_path, MARGIN_INSTRUCTIONS_MAX_TOKENS="120"), root=root) as client:
        result = await explain(client, root, "pkg/x.py")
        system = result["messages"][0]["content"]
        assert "Nearest rule: no globals." in system
        assert "Root rule 0:" in system and "Root rule 59:" not in system  # the root file's first lines
        section = instructions_of(result)
        assert section["tokens"] <= 120
        [dropped] = section["dropped"]
        assert dropped["item"].startswith("AGENTS.md lines ") and dropped["item"].endswith("-60")
        assert "farthest" in dropped["reason"]

    async with margin_client(env=env(fake, tmp_path, MARGIN_INSTRUCTIONS_MAX_TOKENS="70"), root=root) as client:
        result = await explain(client, root, "pkg/x.py")
        section = instructions_of(result)
        assert [d["item"] for d in section["dropped"]] == ["AGENTS.md"]  # whole: too little left for a part
        assert "Root rule" not in result["messages"][0]["content"]
        assert "Nearest rule" in result["messages"][0]["content"]


async def test_changes_on_disk_and_in_the_open_buffer_are_picked_up(fake, tmp_path):
    root = workspace(tmp_path, {"AGENTS.md": "Rule one.", "x.py": "x = 1\n"})
    async with margin_client(env=env(fake, tmp_path), root=root) as client:
        assert "Rule one." in (await explain(client, root, "x.py"))["messages"][0]["content"]
        (root / "AGENTS.md").write_text("Rule two, longer than before.")
        system = (await explain(client, root, "x.py"))["messages"][0]["content"]
        assert "Rule two, longer than before." in system and "Rule one." not in system
        open_doc(client, (root / "AGENTS.md").as_uri(), "Rule three, not saved yet.", language="markdown")
        system = (await explain(client, root, "x.py"))["messages"][0]["content"]
        assert "Rule three, not saved yet." in system and "Rule two" not in system
        (root / "AGENTS.md").unlink()  # the open buffer is still what the user sees
        assert "Rule three" in (await explain(client, root, "x.py"))["messages"][0]["content"]


async def test_nothing_outside_the_workspace_is_ever_read(fake, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "AGENTS.md").write_text("SECRET from outside")
    (outside / "notes.md").write_text("SECRET notes")
    root = workspace(tmp_path, {"x.py": "x = 1\n", "linked/.keep": ""})
    os.symlink(outside / "AGENTS.md", root / "AGENTS.md")  # a file symlink leaving the workspace
    os.symlink(outside, root / "away")  # a folder symlink leaving it
    (root / "away2").mkdir()
    (root / "away2" / "AGENTS.md").write_text("Inside rule.")
    files = '["AGENTS.md", "../outside/notes.md", "away/notes.md", "/etc/hostname"]'
    async with margin_client(env=env(fake, tmp_path, MARGIN_INSTRUCTION_FILES=files), root=root) as client:
        for active in ("x.py", "away/x.py", "away2/x.py"):
            result = await explain(client, root, active)
            system = result["messages"][0]["content"]
            assert "SECRET" not in system, active
        assert "Inside rule." in system


async def test_pinned_memories_join_the_system_prompt_after_the_instructions(fake, tmp_path):
    root = workspace(tmp_path, {"AGENTS.md": "Root rule.", "x.py": "x = 1\n"})
    other = workspace(tmp_path / "other", {"y.py": "y = 1\n"})
    doc = {"uri": (root / "x.py").as_uri()}
    async with margin_client(env=env(fake, tmp_path), root=root, folders=(root, other)) as client:
        await request(client, "margin/remember", {"text": "We deploy with   Fly.io.", "textDocument": doc})
        await request(client, "margin/remember", {"text": "Answer in British English.", "scope": "global"})
        await request(client, "margin/remember", {"text": "Only for the other folder.",
                                                  "textDocument": {"uri": (other / "y.py").as_uri()}})
        result = await explain(client, root, "x.py")
        system = result["messages"][0]["content"]
        assert "Facts the user asked you to remember:\n- We deploy with Fly.io.\n- Answer in British English." in system
        assert system.index("Root rule.") < system.index("Facts the user asked")
        assert "Only for the other folder." not in system
        section = next(s for s in result["budget"]["sections"] if s["name"] == "memories")
        assert section["kept"] == 2 and section["tokens"] > 0
        memories = (await request(client, "margin/memories", {"textDocument": doc}))["memories"]
        for memory in memories:
            await request(client, "margin/forget", {"id": memory["id"]})
        assert "Facts the user asked" not in (await explain(client, root, "x.py"))["messages"][0]["content"]


async def test_selection_edits_follow_the_instructions_too(fake, tmp_path):
    from lsprotocol import types

    from tests.e2e.test_lsp_code_actions import FUNCTION, ITERATIVE, RESOLVING, TEXT, answer, lsp

    root = workspace(tmp_path, {"AGENTS.md": "Rule: keep functions pure.", "a.py": TEXT})
    uri = (root / "a.py").as_uri()
    fake.script(answer(ITERATIVE))
    async with margin_client(env=env(fake, tmp_path), root=root, capabilities=RESOLVING) as client:
        open_doc(client, uri, TEXT)
        actions = await lsp(client, "textDocument/codeAction", {"textDocument": {"uri": uri}, "range": FUNCTION,
                                                                "context": {"diagnostics": []}}, types.CodeActionParams)
        resolved = await lsp(client, "codeAction/resolve", actions[0], types.CodeAction)
        assert resolved["edit"]["documentChanges"]
    system = fake.requests[-1]["messages"][0]["content"]
    assert "Instructions from AGENTS.md:\nRule: keep functions pure." in system


async def test_only_the_projects_own_text_becomes_instructions(fake, tmp_path):
    """Instruction file names are the user's to choose (here .env among them, by the user's own
    setting); even so, a file git ignores is never read as one, the search stops at the
    repository's root in a workspace of many projects, and a home folder opened as the workspace
    gives none at all."""
    root = workspace(tmp_path, {
        "AGENTS.md": "Above the repository: never shown.",
        "app/.gitignore": ".env\n",
        "app/.env": "DEPLOY_TOKEN=from-the-dotenv-file",
        "app/AGENTS.md": "The repository's rule.",
        "app/src/x.py": "x = 1\n",
    })
    (root / "app" / ".git").mkdir()
    names = env(fake, tmp_path, MARGIN_INSTRUCTION_FILES="AGENTS.md,.env")
    async with margin_client(env=names, root=root) as client:
        system = (await explain(client, root, "app/src/x.py"))["messages"][0]["content"]
    assert "The repository's rule." in system
    assert "from-the-dotenv-file" not in system and "Above the repository" not in system

    home = tmp_path / "home"
    for name, text in {".netrc": "machine api.example login me password hunter2", "AGENTS.md": "Home rule.",
                       "notes.py": "y = 2\n"}.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    async with margin_client(env={**env(fake, tmp_path, MARGIN_INSTRUCTION_FILES=".netrc,AGENTS.md"),
                                  "HOME": str(home)}, root=home) as client:
        result = await explain(client, home, "notes.py")
    assert "hunter2" not in result["messages"][0]["content"] and "Home rule." not in result["messages"][0]["content"]
    assert instructions_of(result)["kept"] == 0
