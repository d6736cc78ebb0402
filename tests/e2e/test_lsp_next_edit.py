"""Next-edit suggestions through the real margin-lsp process: the history kept from didChange,
margin/nextEdit's edits with ranges and the place to jump to, the same answer as
textDocument/copilotInlineEdit, and silence for a stale version, a reversal, or the profile off."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.lsp_client import change_doc, margin_client, open_doc, request
from tests.e2e.test_lsp_editops import apply_text_edits
from tests.fakes.fake_openai import reply

WS = "file:///ws"
A = f"{WS}/geometry.py"
BEFORE = ("import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\n"
          "def perimeter(r):\n    return 2 * math.pi * r\n")
AFTER = BEFORE.replace("def area(r):", "def area(radius):")
NEXT = AFTER.replace("math.pi * r * r", "math.pi * radius * radius")


def start(fake, tmp_path, enabled: bool = True):
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", "MARGIN_NEXT_EDIT_ENABLED": str(enabled).lower()}
    return margin_client(env=env, root=Path("/ws"))


def rename(client) -> None:
    """The user's edit, typed: `r` → `radius` in `def area(r):` (line 3), a key at a time."""
    open_doc(client, A, BEFORE, version=1)
    for n, char in enumerate("adius"):
        change_doc(client, A, 2 + n, ((3, 10 + n, 3, 10 + n), char))


def ask(client, method: str = "margin/nextEdit", version: int = 6, line: int = 3):
    return request(client, method, {"textDocument": {"uri": A, "version": version},
                                    "position": {"line": line, "character": 15}})


async def test_the_edit_the_users_edit_calls_for_with_its_range_and_where_to_jump(fake, tmp_path):
    fake.script(reply(f"```python\n{NEXT.rstrip()}\n```"), reply(f"```python\n{NEXT.rstrip()}\n```"))
    async with start(fake, tmp_path) as client:
        rename(client)
        result = await ask(client)
        copilot = await ask(client, "textDocument/copilotInlineEdit")
    assert result["version"] == 6 and "reason" not in result
    assert apply_text_edits(AFTER, result["edits"]) == NEXT
    assert result["jumpTo"] == result["edits"][0]["range"]["start"] and result["jumpTo"]["line"] == 4
    user = fake.requests[0]["messages"][-1]["content"]
    assert "before:\n```\ndef area(r):\n```\nafter:\n```\ndef area(radius):\n```" in user  # one edit, from 5 keys
    (edit,) = copilot["edits"]
    assert edit["textDocument"] == {"uri": A, "version": 6}
    assert apply_text_edits(AFTER, [{"range": edit["range"], "newText": edit["text"]}]) == NEXT


async def test_a_stale_version_a_reversal_and_the_profile_off_are_silence(fake, tmp_path):
    fake.script(reply(f"```python\n{BEFORE.rstrip()}\n```"))
    async with start(fake, tmp_path) as client:
        rename(client)
        stale = await ask(client, version=5)
        assert stale["edits"] == [] and "asked for version 5, the document is at version 6" in stale["reason"]
        assert fake.requests == []  # not asked at all
        back = await ask(client)
        assert back["edits"] == [] and back["reason"] == "reverses the last edit"
        none = await ask(client, "textDocument/copilotInlineEdit")
        assert none == {"edits": []}
    async with start(fake, tmp_path, enabled=False) as client:
        rename(client)
        off = await ask(client)
    assert off["edits"] == [] and "Next-edit suggestions are off" in off["reason"]


async def test_an_answer_that_repeats_the_instructions_is_silence(fake, tmp_path):
    """Silence over junk (core/completion/junk.py) on the next-edit path: a fenced block whose
    lines are the system prompt's own words is no suggestion, and the reason says so."""
    echo = NEXT.replace("import math\n", "import math\n# Predict the edit the user will make next in that window\n")
    fake.script(reply(f"```python\n{echo.rstrip()}\n```"), reply(f"```python\n{NEXT.rstrip()}\n```"))
    async with start(fake, tmp_path) as client:
        rename(client)
        junk = await ask(client)
        assert junk["edits"] == [] and junk["reason"] == "instructions", junk
        change_doc(client, A, 7, ((0, 0, 0, 0), "\n"))  # a new text: asked again, a real answer
        real = await request(client, "margin/nextEdit", {"textDocument": {"uri": A, "version": 7},
                                                           "position": {"line": 4, "character": 15}})
    assert real["edits"] and "reason" not in real, real


@pytest.mark.llama
@pytest.mark.timeout(900)
async def test_the_whole_path_on_the_real_model(llama_server, tmp_path):
    """margin/nextEdit on the real Gemma 3 270M by the chat route: the history from typed changes,
    the prompt counted with llama.cpp's own tokenizer, the model's answer, the decision. A model
    this small rarely rewrites the window well: what is checked is that the answer came and was
    judged — edits that apply to the document, or silence with one of the decision's reasons."""
    env = {"MARGIN_DEFAULTS_BASE_URL": llama_server.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_NEXT_EDIT_ENABLED": "true", "MARGIN_NEXT_EDIT_TIMEOUT_S": "600",
           "MARGIN_NEXT_EDIT_MAX_OUTPUT_TOKENS": "256"}  # the window is ~60 tokens: room to rewrite it
    async with margin_client(env=env, root=Path("/ws")) as client:
        rename(client)
        result = await ask(client)
    assert result["version"] == 6
    if result["edits"]:
        assert apply_text_edits(AFTER, result["edits"]) != AFTER and "reason" not in result
    else:
        assert result["reason"] in ("unchanged", "cut off", "not a rewrite", "reverses the last edit"), result
