"""Edit-ops proposals against the in-process fake provider: the success path and every safe
failure; and preparing to apply a proposal."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from margin.adapters.http_errors import error_from_body
from margin.core.editops import EditOp, apply_edits, reply_json_schema
from margin.core.vfs import Position, Range, TextChange
from margin.core.where import Where
from margin.services.chat import Ask
from margin.services.editops import ApplyRequest
from tests.fakes.fake_provider import BASE_URL, WS, FakeProvider, Gate, answer, close, fake_services

A = f"{WS}/a.py"
TEXT = "def f():\n    return 1\n\ndef g():\n    return 1 + 1\n"


def ops_answer(ops, message="Done.") -> str:
    return json.dumps({"assistant_message": message, "ops": ops})


@pytest.fixture(autouse=True)
def open_file(services):
    services.app.files.open(A, "python", 3, TEXT)


async def visible(services):
    storage = services.app.storage
    thread = await storage.run(lambda s: s.canonical_thread(WS, "chat"))
    return await storage.run(lambda s: s.messages(thread.id))


async def test_a_valid_answer_becomes_ops_edits_and_fingerprints(services, provider):
    editops = services.editops
    provider.script(answer(ops_answer([{"op": "replace", "target_file": "a.py", "target": "match",
                                        "match": "    return 1\n\n", "content": "    return 2\n\n"}],
                                      "Now f returns 2.")))
    outcome = await editops.propose(Ask("make f return 2", Where(A)))
    assert outcome.enabled and outcome.assistant_message == "Now f returns 2."
    assert [(o.op, o.target_file, o.target) for o in outcome.ops] == [("replace", A, "match")]
    assert apply_edits(outcome.bases[A].text, outcome.edits[A]).startswith("def f():\n    return 2\n")
    expected = "sha256:" + hashlib.sha256(TEXT.encode("utf-8")).hexdigest()  # over the exact bytes
    assert outcome.base_fingerprints == {A: expected}
    (sent,) = provider.requests
    assert sent.response_format == {"type": "json_schema",
                                    "json_schema": {"name": "margin_edit_ops", "schema": reply_json_schema()}}
    assert sent.max_tokens == outcome.budget.reserved_output == 2048  # chatOps' maxOutputTokens
    assert sent.messages[0].role == "system"  # the thread's, as chat's: the schema goes with the request
    last = sent.messages[-1].content
    assert 0 <= last.index("make f return 2\n\n") < last.index(json.dumps(reply_json_schema(), separators=(",", ":")))
    assert "assistant_message" not in sent.messages[0].content
    stored = await visible(services)
    assert [m.role for m in stored if not m.hidden] == ["user", "assistant"]
    assert stored[-1].meta["ops"][0]["target_file"] == "a.py"
    assert editops.snapshots.get(A, expected).text == TEXT  # kept for a later rebase


async def test_selection_and_cursor_targets_use_the_request(services, provider):
    provider.script(answer(ops_answer([{"op": "replace", "target_file": "a.py", "target": "selection",
                                        "content": "return 7"}])))
    selection = Range(Position(1, 4), Position(1, 12))
    outcome = await services.editops.propose(Ask("seven", Where(A, selection=selection)))
    assert apply_edits(TEXT, outcome.edits[A]).startswith("def f():\n    return 7\n")


@pytest.mark.parametrize("step,message", [
    (answer("Sure! Here is the change: replace return 1"), "did not answer with valid JSON"),
    (answer(ops_answer([{"op": "rewrite", "target_file": "a.py", "target": "document"}])),
     "does not follow the edit schema (ops.0.op"),
    (answer(ops_answer([{"op": "replace", "target_file": "a.py", "target": "match", "match": "return 1",
                         "content": "x"}])),
     "op 1 (replace match in a.py): the match text occurs 2 times"),
    (answer(ops_answer([{"op": "delete", "target_file": "b.py", "target": "document"}])), "was not shown"),
    (answer('{"assistant_message": "x", "ops": [', finish_reason="length"), "cut off at maxOutputTokens (2048)"),
    (error_from_body(503, {"error": {"message": "loading model"}}, BASE_URL), "HTTP 503"),
    (error_from_body(400, {"error": {"type": "exceed_context_size_error", "message": "too big",
                                     "n_prompt_tokens": 9000, "n_ctx": 8192}}, BASE_URL),
     "the prompt is 9000 tokens"),
], ids=["prose", "schema", "ambiguous-match", "unseen-file", "cut-off", "http-503", "context-too-large"])
async def test_every_failure_is_no_ops_a_message_and_an_unchanged_thread(services, provider, step, message):
    provider.script(step)
    outcome = await services.editops.propose(Ask("change it", Where(A)))
    assert outcome.ops == [] and outcome.edits == {} and message in outcome.assistant_message
    assert len(provider.requests) == 1
    assert await visible(services) == []
    assert services.editops.snapshots.get(A, services.app.files.get(A).fingerprint) is None


async def test_over_budget_calls_no_model(services, provider):
    outcome = await services.editops.propose(Ask("word " * 9000, Where(A)))
    assert outcome.ops == [] and "Too large to send" in outcome.assistant_message
    assert provider.requests == [] and await visible(services) == []


async def test_disabled_profile_says_how_to_enable_it(tmp_path):
    provider = FakeProvider()
    services = fake_services(tmp_path, provider, MARGIN_CHAT_OPS_ENABLED="false")
    outcome = await services.editops.propose(Ask("x"))
    assert outcome.enabled is False and "chatOps.enabled" in outcome.assistant_message
    assert provider.requests == [] and provider.probes == 0
    await close(services)


async def test_edit_ops_share_the_chat_busy_guard(services, provider):
    gate = Gate()
    provider.script(["slow ", gate, "reply"])
    chatting = asyncio.create_task(services.chat.chat(Ask("a chat", Where(A))))
    await gate.reached.wait()
    outcome = await services.editops.propose(Ask("an edit", Where(A)))
    assert outcome.ops == [] and "still answering" in outcome.assistant_message
    assert len(provider.requests) == 1  # the edit never reached the model
    gate.open()
    assert (await chatting).reply == "slow reply"


async def test_a_thread_that_does_not_exist_is_a_message_not_a_call(services, provider):
    outcome = await services.editops.propose(Ask("x", Where(A, thread_id="no-such-thread")))
    assert outcome.enabled and outcome.ops == [] and "There is no thread no-such-thread" in outcome.assistant_message
    assert provider.requests == []


# --- preparing to apply --------------------------------------------------------------------

async def propose_f_returns_2(services, provider):
    provider.script(answer(ops_answer([{"op": "replace", "target_file": "a.py", "target": "match",
                                        "match": "    return 1\n\n", "content": "    return 2\n\n"}])))
    return await services.editops.propose(Ask("make f return 2", Where(A)))


async def test_apply_on_an_unchanged_file_is_the_proposal(services, provider):
    outcome = await propose_f_returns_2(services, provider)
    prepared = services.editops.prepare_apply(ApplyRequest(outcome.ops, outcome.base_fingerprints, Where(A)))
    assert prepared.failure is None and prepared.stale == [] and not prepared.plan.rebased
    assert prepared.plan.texts == {A: TEXT.replace("    return 1\n\n", "    return 2\n\n")}
    assert prepared.files == {A: services.app.files.get(A)}


async def test_apply_after_an_edit_clear_of_the_ops_is_rebased(services, provider):
    outcome = await propose_f_returns_2(services, provider)
    services.app.files.change(A, 4, [TextChange("import os\n", Range(Position(0, 0), Position(0, 0)))])
    prepared = services.editops.prepare_apply(ApplyRequest(outcome.ops, outcome.base_fingerprints, Where(A)))
    assert prepared.failure is None and prepared.plan.rebased
    assert prepared.plan.texts == {A: "import os\n" + TEXT.replace("    return 1\n\n", "    return 2\n\n")}


async def test_apply_after_an_edit_where_the_ops_go_is_stale_and_says_so(services, provider):
    outcome = await propose_f_returns_2(services, provider)
    services.app.files.change(A, 4, [TextChange("    return 5\n", Range(Position(1, 0), Position(2, 0)))])
    prepared = services.editops.prepare_apply(ApplyRequest(outcome.ops, outcome.base_fingerprints, Where(A)))
    assert prepared.stale == [A] and prepared.plan.texts == {}
    assert prepared.failure == (f"Not applied: {A} changed where the edit goes since it was proposed (or was "
                                "closed). Ask again for a fresh proposal.")


async def test_apply_of_a_file_closed_with_no_record_of_its_base_is_stale(services):
    proposed_on = services.app.files.get(A).fingerprint
    ops = [EditOp("replace", A, "document", None, "x = 1\n")]
    services.app.files.close(A)
    prepared = services.editops.prepare_apply(ApplyRequest(ops, {A: proposed_on}))
    assert prepared.stale == [A] and prepared.failure.startswith(f"Not applied: {A} changed where the edit goes")


async def test_two_open_files_with_the_same_text_are_each_their_own_base(services, provider):
    """Two short __init__.py files hold the same text, so the same fingerprint: a proposal
    touching both applies to both (a base was looked up by fingerprint alone, and one file's
    stood for the other's: refused as stale; found by the property test under another seed)."""
    B = f"{WS}/b.py"
    services.app.files.open(B, "python", 1, TEXT)
    provider.script(answer(ops_answer([
        {"op": "replace", "target_file": "a.py", "target": "match", "match": "    return 1\n\n", "content": "    return 2\n\n"},
        {"op": "replace", "target_file": "b.py", "target": "match", "match": "    return 1\n\n", "content": "    return 3\n\n"},
    ])))
    outcome = await services.editops.propose(Ask("change both", Where(A)))
    assert sorted(outcome.edits) == [A, B]
    prepared = services.editops.prepare_apply(ApplyRequest(outcome.ops, outcome.base_fingerprints, Where(A)))
    assert prepared.failure is None and prepared.stale == []
    assert prepared.plan.texts == {A: TEXT.replace("    return 1\n\n", "    return 2\n\n"),
                                   B: TEXT.replace("    return 1\n\n", "    return 3\n\n")}
    # And after both changed clear of the ops: each rebased on its own base.
    for uri in (A, B):
        services.app.files.change(uri, 9, [TextChange("import os\n", Range(Position(0, 0), Position(0, 0)))])
    rebased = services.editops.prepare_apply(ApplyRequest(outcome.ops, outcome.base_fingerprints, Where(A)))
    assert rebased.failure is None and rebased.plan.rebased
    assert rebased.plan.texts[B] == "import os\n" + TEXT.replace("    return 1\n\n", "    return 3\n\n")


async def test_an_open_file_that_is_not_the_text_the_ops_were_made_against_is_never_their_base(services):
    """With no snapshot of what the model saw, the open file is the base only when its
    fingerprint is the one the ops were made against: else the ops would land on text the model
    never saw."""
    seen = "sha256:" + hashlib.sha256(b"def f():\n    return 1\n").hexdigest()  # another text
    ops = [EditOp("replace", A, "match", "    return 1\n\n", "    return 2\n\n")]
    prepared = services.editops.prepare_apply(ApplyRequest(ops, {A: seen}))
    assert prepared.stale == [A] and prepared.plan.texts == {}


async def test_apply_of_ops_without_a_base_fingerprint_is_refused(services):
    ops = [EditOp("replace", A, "document", None, "x = 1\n")]
    prepared = services.editops.prepare_apply(ApplyRequest(ops, {}))
    assert prepared.plan is None and prepared.stale == []
    assert prepared.failure == f"ops target files with no base fingerprint: {A}"
