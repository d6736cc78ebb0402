"""Selection edits against the in-process fake provider: what is offered, the edit of the exact
text the model saw, and every way it can fail without touching the file."""

from __future__ import annotations

import asyncio
import json

import pytest

from margin.adapters.http_errors import error_from_body
from margin.core.editops import apply_edits
from margin.core.llm import MalformedResponse
from margin.core.selection_edit import Diagnostic, selection_reply_schema
from margin.core.tokens.local import tiktoken_counter
from margin.core.vfs import Position, Range, TextChange
from margin.services.errors import RequestError
from margin.services.selection_edit import SelectionEditError, SelectionEditRequest
from margin.services.structured import AnswerFailed
from tests.fakes.fake_provider import BASE_URL, WS, FakeProvider, Gate, close, fake_services
from tests.fakes.fake_provider import answer as reply

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


@pytest.fixture
def service(services):
    services.app.files.open(A, "python", 1, TEXT)
    return services.selection_edits


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
    assert [a.request.kind for a in service.offer(A, FUNCTION, [problem])] == ["comment", "fix", "preset", "preset", "preset"]
    (fix,) = service.offer(A, Range(Position(4, 7), Position(4, 7)), [problem])
    assert (fix.title, fix.request.range) == ("Fix with Margin", Range(Position(4, 0), Position(5, 0)))
    assert fix.request.diagnostics == [problem] and fix.request.fingerprint == service.app.files.get(A).fingerprint


async def test_presets_come_from_settings_and_a_disabled_profile_offers_nothing(tmp_path):
    provider = FakeProvider()
    services = fake_services(tmp_path, provider,
                             MARGIN_CODE_ACTIONS=json.dumps([{"title": "Port to Rust", "instruction": "Port it."}]))
    services.app.files.open(A, "python", 1, TEXT)
    offered = services.selection_edits.offer(A, Range(Position(6, 0), Position(7, 0)), [])
    assert [a.title for a in offered] == ["Margin: Port to Rust"]
    off = fake_services(tmp_path, provider, MARGIN_EDIT_ENABLED="false")
    off.app.files.open(A, "python", 1, TEXT)
    assert off.selection_edits.offer(A, FUNCTION, []) == []
    assert provider.requests == [] and provider.probes == 0  # offering calls no model
    await close(services)
    await close(off)


# --- proposing -----------------------------------------------------------------------------

async def test_a_preset_rewrites_the_selection_of_the_exact_text_the_model_saw(service, provider):
    provider.script(reply(answer("def total(n):\n    return n * (n + 1) // 2")))
    outcome = await service.propose(request())
    assert result_text(service, outcome) == TEXT.replace(
        "def total(n):\n    return n + total(n - 1) if n else 0\n", "def total(n):\n    return n * (n + 1) // 2\n")
    assert outcome.base.fingerprint == outcome.current.fingerprint and not outcome.plan.rebased
    (sent,) = provider.requests
    assert sent.response_format == {"type": "json_schema", "json_schema": {
        "name": "margin_selection_edit", "schema": selection_reply_schema()}}
    assert sent.max_tokens == outcome.budget.reserved_output == 1024  # edit's maxOutputTokens
    system, user = sent.messages
    assert (system.role, user.role) == ("system", "user")
    assert json.dumps(selection_reply_schema(), separators=(",", ":")) in system.content
    assert "```python\ndef total(n):\n    return n + total(n - 1) if n else 0\n```" in user.content
    assert user.content.endswith("Instruction: Simplify the code.")
    assert user.content.startswith("File a.py (python)\n")
    assert outcome.budget.counted > 0 and outcome.budget.exact
    assert outcome.budget.tokenizer == "tiktoken:o200k_base"
    threads = await service.app.storage.run(lambda store: store.list_threads(None))
    assert threads == []  # one-shot: no thread is made or changed


async def test_the_comment_instruction_is_asked_and_the_comment_removed(service, provider):
    provider.script(reply(answer(ITERATIVE)))
    outcome = await service.propose(request("comment", instruction=""))
    user = provider.requests[0].messages[1].content
    assert user.endswith("Instruction: make it iterative")
    assert "margin:" not in user.split("Instruction:")[0]
    assert result_text(service, outcome) == "import os\n\n" + ITERATIVE + "\nprint(total(3))\n"


async def test_fix_sends_the_diagnostics(service, provider):
    provider.script(reply(answer("def total(n):\n    return sum(range(n + 1))\n")))
    diagnostics = [Diagnostic(4, "recursion without a base case guard", "lint", "R1", 4)]
    await service.propose(request("fix", instruction="", diagnostics=diagnostics))
    assert "- line 5: recursion without a base case guard (lint R1)" in provider.requests[0].messages[1].content


async def test_crlf_files_get_crlf_edits(service, provider):
    crlf = TEXT.replace("\n", "\r\n")
    service.app.files.change(A, 2, [TextChange(crlf)])
    provider.script(reply(answer("def total(n):\n    return sum(range(n + 1))")))
    outcome = await service.propose(request())
    assert result_text(service, outcome) == crlf.replace(
        "    return n + total(n - 1) if n else 0\r\n", "    return sum(range(n + 1))\r\n")


@pytest.mark.parametrize("step, error, message", [
    (reply("Here you go: def total(n): ..."), AnswerFailed, "did not answer with valid JSON"),
    (reply(json.dumps({"code": "x"})), AnswerFailed, "does not follow the selection-edit schema"),
    (reply(answer("def total(n):\n    return"), finish_reason="length"), AnswerFailed,
     "cut off at maxOutputTokens (1024)"),
    (error_from_body(500, {"error": {"message": "boom"}}, BASE_URL), AnswerFailed, "HTTP 500: boom"),
    (error_from_body(400, {"error": {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 9000,
                                     "n_ctx": 8192, "message": "too long"}}, BASE_URL), AnswerFailed,
     "the prompt is 9000 tokens"),
    (MalformedResponse(f"The backend at {BASE_URL} sent a body that is not valid JSON of the expected shape."),
     AnswerFailed, "Nothing was changed"),
    (reply(answer("def total(n):\n    return n + total(n - 1) if n else 0\n")), SelectionEditError,
     "proposed no change"),
    (reply(answer("# You are Margin, a programming assistant that rewrites code inside the user's editor.\n"
                  "def total(n):\n    return sum(range(n + 1))\n")), SelectionEditError,
     "answered with its own instructions"),
], ids=["prose", "schema", "cut-off", "http-500", "context-too-large", "malformed", "no-change", "echo"])
async def test_every_failure_is_a_message_and_no_edit(service, provider, step, error, message):
    provider.script(step)
    with pytest.raises(RequestError, match=message.replace("(", r"\(").replace(")", r"\)")) as failed:
        await service.propose(request())
    assert type(failed.value) is error
    assert len(provider.requests) == 1
    assert service.app.files.get(A).text == TEXT


async def test_a_comment_that_shares_words_with_the_instructions_is_code_when_the_file_has_them(service, provider):
    """The echo rule counts only runs of words the file does not already hold (junk.py): code that
    keeps a comment of the file, or quotes the user's own instruction, is an edit."""
    shared = "# rewrites code inside the user's editor, doing exactly what the instruction asks\n"
    service.app.files.change(A, 2, [TextChange(shared + TEXT)])
    provider.script(reply(answer(shared + "def total(n):\n    return sum(range(n + 1))\n")))
    outcome = await service.propose(request(range_=Range(Position(0, 0), Position(6, 0))))
    assert "return sum(range(n + 1))" in result_text(service, outcome)


async def test_a_document_changed_after_the_offer_is_refused_before_any_model_call(service, provider):
    offered_on = service.app.files.get(A).fingerprint
    service.app.files.change(A, 2, [TextChange("# new first line\n", Range(Position(0, 0), Position(0, 0)))])
    with pytest.raises(SelectionEditError, match="changed after the action was offered"):
        await service.propose(request(fingerprint=offered_on))
    assert provider.requests == []


async def test_disabled_profile_and_closed_file_say_what_to_do(tmp_path, provider, service):
    off = fake_services(tmp_path, provider, MARGIN_EDIT_ENABLED="false")
    off.app.files.open(A, "python", 1, TEXT)
    with pytest.raises(SelectionEditError, match="set edit.enabled to true"):
        await off.selection_edits.propose(request())
    await close(off)
    with pytest.raises(SelectionEditError, match="not open"):
        await service.propose(SelectionEditRequest(f"{WS}/gone.py", FUNCTION, "preset", "x"))
    with pytest.raises(SelectionEditError, match="Select the code"):
        await service.propose(request(range_=Range(Position(1, 0), Position(1, 0))))
    assert provider.requests == []


async def test_a_change_clear_of_the_selection_while_the_model_works_is_rebased(service, provider):
    working = Gate()
    provider.script([working, reply(answer("def total(n):\n    return sum(range(n + 1))\n"))])
    proposing = asyncio.ensure_future(service.propose(request()))
    await working.reached.wait()
    service.app.files.change(A, 2, [TextChange("import sys\n", Range(Position(0, 0), Position(0, 0)))])
    working.open()
    outcome = await proposing
    assert outcome.base.version == 1
    assert outcome.plan.rebased and outcome.current.version == 2
    assert result_text(service, outcome) == "import sys\n" + TEXT.replace(
        "    return n + total(n - 1) if n else 0\n", "    return sum(range(n + 1))\n")


async def test_a_change_inside_the_selection_while_the_model_works_is_refused(service, provider):
    working = Gate()
    provider.script([working, reply(answer("def total(n):\n    return sum(range(n + 1))\n"))])
    proposing = asyncio.ensure_future(service.propose(request()))
    await working.reached.wait()
    service.app.files.change(A, 2, [TextChange("count", Range(Position(3, 4), Position(3, 9)))])
    working.open()
    with pytest.raises(SelectionEditError, match="changed where the edit goes"):
        await proposing
    assert service.app.files.get(A).version == 2 and "def count(n)" in service.app.files.get(A).text


async def test_a_large_file_is_trimmed_around_the_selection_to_fit_a_small_window(tmp_path):
    provider = FakeProvider()
    services = fake_services(tmp_path, provider, MARGIN_EDIT_CONTEXT_WINDOW="1024",
                             MARGIN_EDIT_MAX_OUTPUT_TOKENS="200")
    lines = [f"value_{i} = compute({i}, 'padding text to make the line longer')\n" for i in range(3000)]
    services.app.files.open(A, "python", 1, "".join(lines))
    provider.script(reply(answer("value_1500 = 0\n")))
    outcome = await services.selection_edits.propose(request(range_=Range(Position(1500, 0), Position(1501, 0))))
    (sent,) = provider.requests
    assert sent.max_tokens == outcome.budget.reserved_output == 200
    assert outcome.budget.context_window == 1024
    counted = await tiktoken_counter("o200k_base").count_chat(sent.messages)
    assert counted == outcome.budget.counted <= 1024 - 200
    sent = sent.messages
    user = sent[1].content
    assert lines[1499] in user and lines[1501] in user and lines[1500] in user
    assert lines[0] not in user and lines[2999] not in user
    await close(services)
