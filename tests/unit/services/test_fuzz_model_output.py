"""Fuzzed model output through the services, against the in-process fake provider: generated
answers of every structured kind — edit-ops, selection edits, inline completion (the chat
route's JSON and raw FIM text) and thread summaries — valid, malformed, cut short, wrapped in
prose, with wrong fields and types, huge, on files not shown or outside the workspace, with
missing or ambiguous `match` text and unicode edge cases (tests/fuzz_answers.py).

Whatever the answer: no exception but the documented ones; an accepted answer applies exactly
what the oracle computes from the documented op semantics on the text the model saw; a
refused one applies nothing and leaves the thread as it was; a success adds one turn; a shown
completion is never empty, never carries FIM tokens, fences or thinking, and replaces only
auto-closed characters; a bad summary stores nothing, and prompts after any summary fit.

`MARGIN_FUZZ_EXAMPLES` answers per kind (default 300; tests/e2e/test_fuzz_model_output.py runs a
tenth of it through the real server); the full run, with the accepted and refused counts of each
kind printed:
`MARGIN_FUZZ_EXAMPLES=1000 .venv/bin/python -m pytest -q -s tests/unit/services/test_fuzz_model_output.py tests/e2e/test_fuzz_model_output.py`
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from margin.core.llm import BackendTimeout, MalformedResponse
from margin.core.summary import SUMMARY, latest_summary, summary_tokens
from margin.core.threads import NewMessage
from margin.core.vfs import Range
from margin.core.where import Where
from margin.services.chat import Ask
from margin.services.completion import CompletionRequest
from margin.services.editops import ApplyRequest
from margin.services.errors import RequestError
from margin.services.selection_edit import SelectionEditRequest
from tests.fakes.fake_provider import FakeProvider, answer, close, fake_services
from tests.fuzz_answers import (
    OUTSIDE,
    A,
    B,
    answer_text,
    check_suggestion,
    document,
    edit_ops_answer,
    examples,
    expected_ops,
    expected_replacement,
    hole_answer,
    inside_crlf,
    raw_completion,
    selection_answer,
    sha,
    utf16_position,
)

EXAMPLES = examples(300)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # huge answers' reprs
TALLY: Counter[str] = Counter()
"""accepted/refused counts by kind, printed at the end of the module (pytest -s)"""


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    for kind in sorted({k.split(":")[0] for k in TALLY}):
        print(f"\nfuzz {kind}: {TALLY[kind + ':accepted'] + TALLY[kind + ':refused']} answers, "
              f"{TALLY[kind + ':accepted']} accepted, {TALLY[kind + ':refused']} refused")


class Harness:
    """One event loop and one set of services over many examples (a new thread now and then)."""

    def __init__(self, tmp_path, **env: str) -> None:
        self.runner = asyncio.Runner()
        self.provider = FakeProvider()
        self.services = fake_services(tmp_path, self.provider, **env)
        self.services.chat.summaries.enabled = False  # summaries are fuzzed on their own below

    def run(self, coroutine):
        return self.runner.run(coroutine)

    def close(self) -> None:
        self.run(close(self.services))
        self.runner.close()


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    made: dict[str, Harness] = {}

    def get(kind: str, **env: str) -> Harness:
        if kind not in made:
            made[kind] = Harness(tmp_path_factory.mktemp("fuzz"), **env)
        return made[kind]

    yield get
    for h in made.values():
        h.close()


# --- edit-ops ----------------------------------------------------------------------------------

@st.composite
def edit_ops_case(draw):
    texts = {A: draw(document()), B: draw(document()), OUTSIDE: draw(document())}
    names = {A: "a.py", B: "b.py", OUTSIDE: OUTSIDE}
    text = texts[A]
    offsets = [i for i in range(len(text) + 1) if not inside_crlf(text, i)]
    selection = cursor = None
    if draw(st.booleans()):
        ends = sorted(draw(st.lists(st.sampled_from(offsets), min_size=2, max_size=2)))
        selection = (ends[0], ends[1])
    if draw(st.booleans()):
        cursor = draw(st.sampled_from(offsets))
    finish = draw(st.sampled_from(["stop"] * 12 + ["length"]))
    reply, how = draw(edit_ops_answer(texts, names))
    return texts, names, selection, cursor, reply, how, finish


@FUZZ
@given(case=edit_ops_case())
def test_edit_ops_answers(harness, case):
    h = harness("test_edit_ops_answers")
    h.run(_edit_ops(h, *case))


async def _edit_ops(h: Harness, texts, names, selection, cursor, reply, how, finish):
    services, provider = h.services, h.provider
    for uri, text in texts.items():
        old = services.app.files.get(uri)
        services.app.files.open(uri, "python", (old.version + 1) if old else 1, text)
    if getattr(h, "turns", 0) % 20 == 0:  # a fresh thread now and then, so prompts stay small
        h.thread = (await services.threads.new(Where(A))).id
    thread = h.thread
    where = Where(A, selection=Range(utf16_position(texts[A], selection[0]), utf16_position(texts[A], selection[1]))
                  if selection else None,
                  position=utf16_position(texts[A], cursor) if cursor is not None else None, thread_id=thread)
    # The cursor an op sees: the request's, else the selection's end.
    anchor = cursor if cursor is not None else (selection[1] if selection else None)
    before = await services.app.storage.run(lambda s: s.messages(thread))
    asked = len(provider.requests)
    provider.script(answer(reply, finish_reason=finish))
    outcome = await services.editops.propose(Ask("change it", where))  # raises nothing, ever
    assert provider.pending == 0 and len(provider.requests) == asked + 1
    # The files the model was shown, by their headers in the prompt (a file the budget left out
    # is not shown, and ops on it must be refused).
    headers = set(re.findall(r"^File (\S+) \(", "\n".join(m.content for m in provider.requests[-1].messages), re.MULTILINE))
    shown = {uri: name for uri, name in names.items() if name in headers}
    expected = expected_ops(reply, finish, {uri: texts[uri] for uri in shown}, shown, selection, anchor, A)
    after = await services.app.storage.run(lambda s: s.messages(thread))
    if expected.texts is None:
        TALLY["edit-ops:refused"] += 1
        assert outcome.ops == [] and outcome.edits == {} and outcome.assistant_message.strip(), how
        assert after == before, "a refused answer changed the thread"
        return
    TALLY["edit-ops:accepted"] += 1
    h.turns = getattr(h, "turns", 0) + 1
    assert outcome.assistant_message == expected.reply["assistant_message"]
    assert len(outcome.ops) == len(expected.reply["ops"])
    assert outcome.base_fingerprints == {uri: sha(texts[uri]) for uri in shown}
    visible = [m for m in after if not m.hidden]
    assert after[: len(before)] == before and [m.role for m in visible[-2:]] == ["user", "assistant"]
    assert visible[-2].content.startswith("change it") and visible[-1].content == outcome.assistant_message
    assert len(visible) == len([m for m in before if not m.hidden]) + 2  # one turn
    prepared = services.editops.prepare_apply(ApplyRequest(outcome.ops, outcome.base_fingerprints, where))
    assert prepared.failure is None and not prepared.plan.rebased
    changed = {uri: new for uri, new in expected.texts.items()}
    assert prepared.plan.texts == changed, "applying is not exactly the validated ops"


# --- selection edits -----------------------------------------------------------------------------

@st.composite
def selection_case(draw):
    text = draw(document().filter(bool))  # something to select: every example is an answer
    offsets = [i for i in range(len(text) + 1) if not inside_crlf(text, i)]
    start, end = sorted(draw(st.lists(st.sampled_from(offsets), min_size=2, max_size=2, unique=True)))
    finish = draw(st.sampled_from(["stop"] * 12 + ["length"]))
    reply, how = draw(selection_answer())
    return text, start, end, reply, how, finish


@FUZZ
@given(case=selection_case())
def test_selection_edit_answers(harness, case):
    h = harness("test_selection_edit_answers")
    h.run(_selection(h, *case))


async def _selection(h: Harness, text, start, end, reply, how, finish):
    services, provider = h.services, h.provider
    old = services.app.files.get(A)
    services.app.files.open(A, "python", (old.version + 1) if old else 1, text)
    provider.script(answer(reply, finish_reason=finish))
    request = SelectionEditRequest(A, Range(utf16_position(text, start), utf16_position(text, end)), "preset",
                                   "Simplify.", fingerprint=sha(text))
    expected = expected_replacement(reply, finish, text, start, end)
    try:
        outcome = await services.selection_edits.propose(request)
    except RequestError as error:  # the documented failure: a message, nothing applied
        assert provider.pending == 0
        assert expected is None, f"refused a valid answer ({how}): {error}"
        assert str(error).strip()
        TALLY["selection:refused"] += 1
        return
    assert provider.pending == 0
    assert expected is not None, f"accepted an answer that must be refused ({how})"
    TALLY["selection:accepted"] += 1
    assert outcome.base.text == text and not outcome.plan.rebased
    assert outcome.plan.texts == {A: expected}, "the edit is not exactly the validated replacement"


# --- inline completion ---------------------------------------------------------------------------

@st.composite
def completion_case(draw, answers):
    text = draw(document())
    offsets = [i for i in range(len(text) + 1) if not inside_crlf(text, i)]
    cursor = draw(st.sampled_from(offsets))
    if draw(st.integers(0, 3)) == 0:  # an auto-closed bracket after the cursor
        text, cursor = text[:cursor] + draw(st.sampled_from(["()", "[]", "('')", "{}"])) + text[cursor:], cursor + 1
    finish = draw(st.sampled_from(["stop"] * 12 + ["length"]))
    return text, cursor, draw(answers), finish


def _hole_answers():
    return hole_answer()


@FUZZ
@given(case=completion_case(_hole_answers()))
def test_chat_route_completion_answers(harness, case):
    h = harness("test_chat_route_completion_answers")
    text, cursor, (reply, how), finish = case
    h.provider.fill_answers["infill"] = []  # llama.cpp without FIM tokens: the chat route
    h.provider.script(answer(reply, finish_reason=finish))
    h.run(_completion(h, text, cursor, "chat", how))
    assert h.provider.pending == 0


@FUZZ
@given(case=completion_case(raw_completion()))
def test_raw_fim_completion_answers(harness, case):
    h = harness("raw-fim", MARGIN_COMPLETION_MODEL="qwen2.5-coder-1.5b")
    text, cursor, raw, _ = case
    # llama.cpp with FIM tokens: the one-token probe (once per backend) is answered empty
    def infill(request):
        return "" if request.max_tokens == 1 else raw

    h.provider.fill_answers["infill"] = [infill, infill]
    h.run(_completion(h, text, cursor, "infill", "raw"))


async def _completion(h: Harness, text: str, cursor: int, route: str, how: str):
    services = h.services
    old = services.app.files.get(A)
    version = (old.version + 1) if old else 1
    services.app.files.open(A, "python", version, text)
    services.completion.cache = type(services.completion.cache)()  # every answer asked of the model
    outcome = await services.completion.complete(CompletionRequest(A, utf16_position(text, cursor), version))
    assert outcome.route in (route, None)  # None: the answer failed before a route was named
    kind = f"completion-{route}"
    if outcome.suggestion is None:
        TALLY[kind + ":refused"] += 1
        assert outcome.range is None
        return
    TALLY[kind + ":accepted"] += 1
    suggestion = outcome.suggestion
    replaced = text[cursor:cursor + suggestion.replaces]
    check_suggestion(suggestion.text, replaced)
    assert outcome.range == Range(utf16_position(text, cursor), utf16_position(text, cursor + suggestion.replaces))
    assert cursor + suggestion.replaces <= len(text)


# --- summaries -----------------------------------------------------------------------------------

@st.composite
def summary_step(draw):
    """A streamed summary answer: pieces of text, maybe cut by an error, maybe cut at the limit."""
    pieces = draw(st.lists(st.one_of(answer_text(), st.sampled_from(["", " ", "\n", "<think>x</think>",
                                                                     "Summary: a.py f() returns 2."])),
                           max_size=4))
    end = draw(st.sampled_from(["stop"] * 6 + ["length", "error", "malformed", "raise-first"]))
    if end == "raise-first":
        return BackendTimeout("no answer", timeout_s=1), "error"
    if end == "error":
        return [*pieces, BackendTimeout("stalled", timeout_s=1)], "error"
    if end == "malformed":
        return [*pieces, MalformedResponse("a chunk that is not JSON")], "error"
    return [*pieces, answer("", finish_reason=end)], "".join(pieces)


WINDOW = 8192


@FUZZ
@given(step=summary_step())
def test_summary_answers(harness, step):
    h = harness("test_summary_answers")
    h.run(_summary(h, *step))


def as_text(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates replaced (U+FFFD)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


async def _summary(h: Harness, step, text):
    services, provider = h.services, h.provider
    services.app.files.open(A, "python", 1, "def f():\n    return 1\n")
    thread = (await services.threads.new(Where(A))).id
    turns = []
    for i in range(12):  # a long history, stored directly
        turns += [NewMessage("user", f"turn {i}: " + "please change f " * 40),
                  NewMessage("assistant", f"reply {i}: " + "done with f " * 60)]
    await services.app.storage.run(lambda s: s.append(thread, turns))
    before = await services.app.storage.run(lambda s: s.messages(thread))
    provider.script(step)
    made = await services.chat.summaries.summarise(thread, 1200)  # never raises
    assert provider.pending == 0
    after = await services.app.storage.run(lambda s: s.messages(thread))
    bound = summary_tokens(WINDOW)
    text = as_text(text)
    usable = text != "error" and text.strip()
    counter = await _counter(services)
    if made is None:
        TALLY["summary:refused"] += 1
        assert after == before, "a refused summary changed the thread"
        assert not usable or (await counter.count_texts([text.strip()]))[0] > bound, "a good summary refused"
    else:
        TALLY["summary:accepted"] += 1
        assert usable, "a summary stored from an answer that failed or was empty"
        (new,) = after[len(before):]
        assert after[: len(before)] == before and new.kind == SUMMARY and new.hidden
        assert latest_summary(after).text == made.text == text.strip()
        counted = (await counter.count_texts([made.text]))[0]
        assert counted <= 2 * bound, f"a summary of {counted} tokens stored, over twice its bound {bound}"
    # Whatever was stored, the next prompt fits the window.
    prepared = await services.chat.explain(Ask("and now?", Where(A, thread_id=thread)))
    plan = prepared.assembly.plan
    assert plan.over_budget is None and plan.total <= plan.limit


async def _counter(services):
    from margin.services.profile import resolve_profile

    return (await resolve_profile(services.app, "chat")).counter


# --- regressions: what the fuzzing found -----------------------------------------------------------

def test_a_close_of_thinking_after_another_is_never_shown():
    """`</think></think>` (and a closed block followed by a stray close) showed `</think>`."""
    from margin.core.completion.postprocess import CompletionContext, clean

    context = CompletionContext("def f(x):\n    return ", "\n", "python")
    assert clean("</think></think>", context) is None
    assert clean("<think>a</think></think>", context) is None
    assert clean("thought</think>x + 1", context).text == "x + 1"


async def _long_thread(services) -> str:
    services.app.files.open(A, "python", 1, "def f():\n    return 1\n")
    thread = (await services.threads.new(Where(A))).id
    turns = [NewMessage(role, f"{role} {i}: " + "words about f " * 50) for i in range(12) for role in ("user", "assistant")]
    await services.app.storage.run(lambda s: s.append(thread, turns))
    return thread


async def test_a_summary_far_over_its_bound_is_not_stored(services, provider):
    """A backend that ignored max_tokens had its 20,000-token summary stored whole."""
    thread = await _long_thread(services)
    before = await services.app.storage.run(lambda s: s.messages(thread))
    provider.script(["x " * 20_000])
    assert await services.chat.summaries.summarise(thread, 1200) is None
    assert await services.app.storage.run(lambda s: s.messages(thread)) == before


async def test_a_summary_with_a_split_or_lone_surrogate_is_stored_as_text(services, provider):
    """A stream whose JSON escapes split a surrogate pair (or left one alone) crashed the store."""
    thread = await _long_thread(services)
    provider.script(["f() returns 2 \ud83d", "\ude00 then \ud83d"])
    made = await services.chat.summaries.summarise(thread, 1200)
    assert made is not None and made.text == "f() returns 2 😀 then \ufffd"
    assert latest_summary(await services.app.storage.run(lambda s: s.messages(thread))).text == made.text
