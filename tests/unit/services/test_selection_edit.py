"""Selection edits against the fake backend: what is offered, the edit of the exact text the
model saw, and every way it can fail without touching the file."""

from __future__ import annotations

import asyncio
import json

import pytest

from margin.core.editops import apply_edits
from margin.core.llm import ChatMessage
from margin.core.selection_edit import Diagnostic, selection_reply_schema
from margin.core.tokens.local import tiktoken_counter
from margin.core.vfs import Position, Range, TextChange
from margin.services.chat import ChatService
from margin.services.selection_edit import SelectionEditError, SelectionEditRequest, SelectionEditService
from margin.wiring import build_app
from tests.fakes.fake_openai import raw, reply, status

WS = "file:///ws"
A = f"{WS}/a.py"
TEXT = ("import os\n"
        "\n"
        "# margin: make it iterative\n"
        "def total(n):\n"
        "    return n + total(n - 1) if n else 0\n"
        "\n"
        "print(total(3))\n")
FUNCTION = Range(Position(3, 0), Position(5, 0))  # `def total` and its body
ITERATIVE = "def total(n):\n    result = 0\n    while n:\n        result, n = result + n, n - 1\n    return result\n"


def answer(replacement: str) -> str:
    return json.dumps({"replacement": replacement})


def make_app(fake, tmp_path, **env):
    return build_app({"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
                      "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", **env})


@pytest.fixture
async def service(fake, tmp_path):
    app = make_app(fake, tmp_path)
    app.files.open(A, "python", 1, TEXT)
    yield SelectionEditService(ChatService(app, workspace_folders=lambda: [WS]))
    await app.aclose()


def request(kind="preset", range_=FUNCTION, instruction="Simplify the code.", **extra) -> SelectionEditRequest:
    return SelectionEditRequest(A, range_, kind, instruction, **extra)


def result_text(service, outcome) -> str:
    return apply_edits(outcome.current.text, outcome.plan.edits[A])


# --- offering ------------------------------------------------------------------------------

def test_actions_are_offered_for_a_selection_and_none_for_a_cursor(service):
    titles = [a.title for a in service.offer(A, FUNCTION, [])]
    assert titles == ["Margin: make it iterative", "Margin: Add docstring", "Margin: Explain with comments",
                      "Margin: Simplify"]
    assert service.offer(A, Range(Position(3, 2), Position(3, 2)), []) == []
    assert service.offer(f"{WS}/closed.py", FUNCTION, []) == []


def test_fix_with_margin_appears_with_diagnostics_and_at_a_cursor_covers_their_lines(service):
    problem = Diagnostic(4, "maximum recursion depth", "lint", None, 4)
    assert [a.kind for a in service.offer(A, FUNCTION, [problem])] == ["comment", "fix", "preset", "preset", "preset"]
    (fix,) = service.offer(A, Range(Position(4, 7), Position(4, 7)), [problem])
    assert (fix.title, fix.range) == ("Fix with Margin", Range(Position(4, 0), Position(5, 0)))


def test_presets_come_from_settings_and_a_disabled_profile_offers_nothing(fake, tmp_path):
    app = make_app(fake, tmp_path, MARGIN_CODE_ACTIONS=json.dumps([{"title": "Port to Rust", "instruction": "Port it."}]))
    app.files.open(A, "python", 1, TEXT)
    service = SelectionEditService(ChatService(app))
    assert [a.title for a in service.offer(A, Range(Position(6, 0), Position(7, 0)), [])] == ["Margin: Port to Rust"]
    off = make_app(fake, tmp_path, MARGIN_EDIT_ENABLED="false")
    off.files.open(A, "python", 1, TEXT)
    assert SelectionEditService(ChatService(off)).offer(A, FUNCTION, []) == []


# --- proposing -----------------------------------------------------------------------------

async def test_a_preset_rewrites_the_selection_of_the_exact_text_the_model_saw(service, fake):
    fake.script(reply(answer("def total(n):\n    return n * (n + 1) // 2")))
    outcome = await service.propose(request())
    assert result_text(service, outcome) == TEXT.replace(
        "def total(n):\n    return n + total(n - 1) if n else 0\n", "def total(n):\n    return n * (n + 1) // 2\n")
    assert outcome.base.fingerprint == outcome.current.fingerprint and not outcome.plan.rebased
    sent = fake.requests[0]
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "margin_selection_edit", "schema": selection_reply_schema()}}
    system, user = sent["messages"]
    assert json.dumps(selection_reply_schema(), separators=(",", ":")) in system["content"]
    assert "```python\ndef total(n):\n    return n + total(n - 1) if n else 0\n```" in user["content"]
    assert user["content"].endswith("Instruction: Simplify the code.")
    assert user["content"].startswith("File: a.py (python)")
    assert outcome.budget["counted"] > 0 and outcome.budget["tokenizer"]["exact"]
    threads = await service.app.threads.run(lambda store: store.list_threads(None))
    assert threads == []  # one-shot: no thread is made or changed


async def test_the_comment_instruction_is_asked_and_the_comment_removed(service, fake):
    fake.script(reply(answer(ITERATIVE)))
    outcome = await service.propose(request("comment", instruction=""))
    user = fake.requests[0]["messages"][1]["content"]
    assert user.endswith("Instruction: make it iterative")
    assert "margin:" not in user.split("Instruction:")[0]
    assert result_text(service, outcome) == "import os\n\n" + ITERATIVE + "\nprint(total(3))\n"


async def test_fix_sends_the_diagnostics(service, fake):
    fake.script(reply(answer("def total(n):\n    return sum(range(n + 1))\n")))
    diagnostics = [Diagnostic(4, "recursion without a base case guard", "lint", "R1", 4)]
    await service.propose(request("fix", instruction="", diagnostics=diagnostics))
    assert "- line 5: recursion without a base case guard (lint R1)" in fake.requests[0]["messages"][1]["content"]


async def test_crlf_files_get_crlf_edits(service, fake):
    crlf = TEXT.replace("\n", "\r\n")
    service.app.files.change(A, 2, [TextChange(crlf)])
    fake.script(reply(answer("def total(n):\n    return sum(range(n + 1))")))
    outcome = await service.propose(request())
    assert result_text(service, outcome) == crlf.replace(
        "    return n + total(n - 1) if n else 0\r\n", "    return sum(range(n + 1))\r\n")


@pytest.mark.parametrize("step, message", [
    (reply("Here you go: def total(n): ..."), "did not answer with valid JSON"),
    (reply(json.dumps({"code": "x"})), "does not follow the selection-edit schema"),
    (reply(answer("def total(n):\n    return"), finish_reason="length"), "cut off at maxOutputTokens (1024)"),
    (status(500, {"error": {"message": "boom"}}), "Nothing was changed"),
    (status(400, {"error": {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 9000,
                            "n_ctx": 8192, "message": "too long"}}), "9000"),
    (raw("not json at all"), "Nothing was changed"),
    (reply(answer("def total(n):\n    return n + total(n - 1) if n else 0\n")), "proposed no change"),
])
async def test_every_failure_is_a_message_and_no_edit(service, fake, step, message):
    fake.script(step)
    with pytest.raises(SelectionEditError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await service.propose(request())
    assert service.app.files.get(A).text == TEXT


async def test_a_document_changed_after_the_offer_is_refused_before_any_model_call(service, fake):
    offered_on = service.app.files.get(A).fingerprint
    service.app.files.change(A, 2, [TextChange("# new first line\n", Range(Position(0, 0), Position(0, 0)))])
    with pytest.raises(SelectionEditError, match="changed after the action was offered"):
        await service.propose(request(fingerprint=offered_on))
    assert fake.requests == []


async def test_disabled_profile_and_closed_file_say_what_to_do(fake, tmp_path, service):
    off = make_app(fake, tmp_path, MARGIN_EDIT_ENABLED="false")
    with pytest.raises(SelectionEditError, match="set edit.enabled to true"):
        await SelectionEditService(ChatService(off)).propose(request())
    with pytest.raises(SelectionEditError, match="not open"):
        await service.propose(SelectionEditRequest(f"{WS}/gone.py", FUNCTION, "preset", "x"))
    with pytest.raises(SelectionEditError, match="Select the code"):
        await service.propose(request(range_=Range(Position(1, 0), Position(1, 0))))
    assert fake.requests == []


async def test_a_change_clear_of_the_selection_while_the_model_works_is_rebased(service, fake):
    fake.script(reply(answer("def total(n):\n    return sum(range(n + 1))\n"), delay_s=0.5))
    proposing = asyncio.ensure_future(service.propose(request()))
    await asyncio.sleep(0.2)
    service.app.files.change(A, 2, [TextChange("import sys\n", Range(Position(0, 0), Position(0, 0)))])
    outcome = await proposing
    assert outcome.plan.rebased and outcome.current.version == 2
    assert result_text(service, outcome) == "import sys\n" + TEXT.replace(
        "    return n + total(n - 1) if n else 0\n", "    return sum(range(n + 1))\n")


async def test_a_change_inside_the_selection_while_the_model_works_is_refused(service, fake):
    fake.script(reply(answer("def total(n):\n    return sum(range(n + 1))\n"), delay_s=0.5))
    proposing = asyncio.ensure_future(service.propose(request()))
    await asyncio.sleep(0.2)
    service.app.files.change(A, 2, [TextChange("count", Range(Position(3, 4), Position(3, 9)))])
    with pytest.raises(SelectionEditError, match="changed where the edit goes"):
        await proposing


async def test_a_large_file_is_trimmed_around_the_selection_to_fit_a_small_window(fake, tmp_path):
    app = make_app(fake, tmp_path, MARGIN_EDIT_CONTEXT_WINDOW="1024", MARGIN_EDIT_MAX_OUTPUT_TOKENS="200")
    lines = [f"value_{i} = compute({i}, 'padding text to make the line longer')\n" for i in range(3000)]
    app.files.open(A, "python", 1, "".join(lines))
    service = SelectionEditService(ChatService(app, workspace_folders=lambda: [WS]))
    fake.script(reply(answer("value_1500 = 0\n")))
    outcome = await service.propose(request(range_=Range(Position(1500, 0), Position(1501, 0))))
    sent = [ChatMessage(m["role"], m["content"]) for m in fake.requests[0]["messages"]]
    counted = await tiktoken_counter("o200k_base").count_chat(sent)
    assert counted == outcome.budget["counted"] <= 1024 - 200
    user = sent[1].content
    assert lines[1499] in user and lines[1501] in user and lines[1500] in user
    assert lines[0] not in user and lines[2999] not in user
    await app.aclose()
