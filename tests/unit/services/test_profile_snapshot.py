"""A request's profile is one snapshot, taken when the request enters. Settings that change
while it runs — here while it probes the backend to resolve its profile, or while the model
answers — do not split it: the prompt is budgeted and sent with the same maxOutputTokens,
model, temperature, window and tokenizer. The next request runs with the new settings."""

from __future__ import annotations

import json

import pytest

from margin.core.settings import Source
from margin.core.vfs import Position, Range
from margin.core.where import Where
from margin.services.chat import Ask
from margin.services.errors import RequestError
from margin.services.selection_edit import SelectionEditRequest
from tests.fakes.fake_provider import WS, FakeProvider, answer, close, fake_services

A = f"{WS}/a.py"
TEXT = "def total(n):\n    return n + total(n - 1) if n else 0\n\nprint(total(3))\n"
FUNCTION = Range(Position(0, 0), Position(2, 0))

CHANGED = {"maxOutputTokens": 64, "model": "other", "temperature": 0.5, "contextWindow": 4096,
           "tokenizer": "heuristic"}


def change_settings(services, profile: str) -> None:
    """A settings change: a new layer of the user's own settings (a workspace's may only narrow)."""
    problems = services.app.settings.update("init", Source("initializationOptions", {profile: CHANGED}))
    assert problems == []


@pytest.fixture
async def setup(tmp_path):
    provider = FakeProvider()
    services = fake_services(tmp_path, provider)
    services.app.files.open(A, "python", 1, TEXT)
    yield services, provider
    await close(services)


async def chat(services):
    outcome = await services.chat.chat(Ask("what does total do?", Where(A)))
    assert outcome.reply == "ok" and outcome.not_sent is None
    return outcome


async def propose_ops(services):
    return await services.editops.propose(Ask("print the answer", Where(A)))


async def propose_selection_edit(services):
    return await services.selection_edits.propose(SelectionEditRequest(A, FUNCTION, "preset", "Simplify."))


def succeeded(outcome) -> bool:
    """A chat reply, edit-ops with ops, or a selection edit with an edit."""
    return bool(getattr(outcome, "reply", None) or getattr(outcome, "ops", None) or getattr(outcome, "plan", None))


OPS = json.dumps({"assistant_message": "Done.", "ops": [
    {"op": "replace", "target_file": "a.py", "target": "match", "match": "print(total(3))", "content": "print(6)"}]})
REWRITE = json.dumps({"replacement": "def total(n):\n    return n * (n + 1) // 2\n"})

CASES = [
    pytest.param("chat", chat, "ok", id="chat"),
    pytest.param("chatOps", propose_ops, OPS, id="chatOps"),
    pytest.param("edit", propose_selection_edit, REWRITE, id="edit"),
]


@pytest.mark.parametrize("profile, run, reply", CASES)
async def test_a_settings_change_while_the_profile_resolves_does_not_split_the_request(
        setup, profile, run, reply):
    services, provider = setup
    assert services.app.settings.update("file", Source("settings file", {profile: {"model": "first"}})) == []
    entered = services.app.settings.current.profile(profile)
    provider.on_probe = lambda: change_settings(services, profile) if provider.probes == 1 else None
    provider.script(answer(reply), answer(reply))

    outcome = await run(services)
    assert succeeded(outcome), outcome
    assert provider.probes == 1 and services.app.settings.current.profile(profile).max_output_tokens == 64
    (sent,) = provider.requests
    budget = outcome.budget
    assert sent.max_tokens == budget.reserved_output == entered.max_output_tokens != 64
    assert sent.model == entered.model == "first"
    assert sent.temperature == entered.temperature != 0.5
    assert budget.context_window == 8192  # probed (contextWindow auto), not the 4096 set meanwhile
    assert (budget.tokenizer, budget.exact) == ("tiktoken:o200k_base", True)

    following = await run(services)  # the next request sees the new settings
    assert succeeded(following), following
    sent = provider.requests[1]
    budget = following.budget
    assert sent.max_tokens == budget.reserved_output == 64
    assert (sent.model, sent.temperature) == ("other", 0.5)
    assert budget.context_window == 4096
    assert (budget.tokenizer, budget.exact) == ("heuristic", False)


@pytest.mark.parametrize("profile, run", [
    pytest.param("chatOps", propose_ops, id="chatOps"),
    pytest.param("edit", propose_selection_edit, id="edit"),
])
async def test_a_settings_change_while_the_model_answers_does_not_change_what_is_reported(setup, profile, run):
    """An answer cut off at maxOutputTokens names the limit it was sent with, not the one in
    force when the answer arrived."""
    services, provider = setup
    entered = services.app.settings.current.profile(profile)
    provider.script([lambda: change_settings(services, profile),
                     answer('{"assistant_message": "x", "ops": [', finish_reason="length")])
    try:
        outcome = await run(services)
        message = outcome.assistant_message  # edit-ops answer failures as a message...
    except RequestError as error:  # ...selection edits as an error
        message = str(error)
    (sent,) = provider.requests
    assert sent.max_tokens == entered.max_output_tokens != 64
    assert f"cut off at maxOutputTokens ({entered.max_output_tokens})" in message
    assert services.app.settings.current.profile(profile).max_output_tokens == 64
