"""Fuzzed model output through the real margin-lsp process over the loopback fake backend: a
sample of the generated answers of tests/fuzz_answers.py — edit-ops (margin/editOps, then
margin/applyOps and the workspace/applyEdit it sends), selection edits (codeAction/resolve) and
inline completion (the chat route's JSON, and raw text from llama.cpp's /infill) — each
against documents full of unicode edge cases; and thread summaries written in the background
(streamed odd text, huge text, cut streams, errors, garbage) at a small window.

Whatever the answer: every request is answered, with a result or a documented LSP error
(RequestFailed), and the server never exits; an edit the editor is asked to apply is exactly
the oracle's application of the validated ops or replacement to the text the model saw; a
refused answer sends no edit and leaves the thread (`margin/history`) as it was, a success adds
one turn; a completion item is never empty or markup, and its range stays on the cursor's line.

`MARGIN_FUZZ_SERVER_EXAMPLES` answers per kind (default: `MARGIN_FUZZ_EXAMPLES` / 10, so CI's
300 give 30; the full run sets 1000).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.e2e.lsp_client import change_doc, margin_client, open_doc, request
from tests.fakes.fake_openai import FakeBackend, reply, status
from tests.fuzz_answers import (
    OUTSIDE,
    A,
    B,
    answer_text,
    apply_lsp_edits,
    check_suggestion,
    document,
    edit_ops_answer,
    examples,
    expected_ops,
    expected_replacement,
    hole_answer,
    inside_crlf,
    line_starts,
    raw_completion,
    selection_answer,
    utf16_offset,
    utf16_position,
)

EXAMPLES = int(os.environ.get("MARGIN_FUZZ_SERVER_EXAMPLES", max(examples(300) // 10, 1)))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.large_base_example, HealthCheck.function_scoped_fixture])
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
TALLY: Counter[str] = Counter()
CAPS = types.ClientCapabilities(
    workspace=types.WorkspaceClientCapabilities(apply_edit=True, configuration=True),
    text_document=types.TextDocumentClientCapabilities(code_action=types.CodeActionClientCapabilities(
        resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]), data_support=True)))


class Session:
    """One real server over one fake backend, kept across examples on one event loop."""

    def __init__(self, tmp_path: Path, infill: bool = False) -> None:
        self.runner = asyncio.Runner()
        self.fake = FakeBackend(props={"default_generation_settings": {"n_ctx": 8192}},
                                models=[{"id": "fake-model", "owned_by": "llamacpp"}]).__enter__()
        env = {"MARGIN_DEFAULTS_BASE_URL": self.fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
               "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base"}
        if infill:
            env["MARGIN_COMPLETION_MODEL"] = "qwen2.5-coder-1.5b"
            self.fake.routes["/infill"] = [status(200, {"content": ""})]  # the probe: FIM tokens, yes
        self.versions: dict[str, int] = {}
        self._context = margin_client(env=env, root=Path("/ws"), capabilities=CAPS)
        self.client = self.run(self._context.__aenter__())
        client = self.client
        for message in (types.InlineCompletionRequest,):  # its params as written here
            client.converter.register_unstructure_hook(message, lambda m: {
                "id": m.id, "method": m.method, "jsonrpc": m.jsonrpc, "params": m.params})
        client.converter.register_structure_hook(types.CodeActionResponse,
                                                           lambda obj, response: response(**obj))

    def run(self, coroutine):
        return self.runner.run(coroutine)

    def show(self, uri: str, text: str) -> int:
        """Open the document, or replace its text; the version it is at."""
        version = self.versions.get(uri, 0) + 1
        if version == 1:
            open_doc(self.client, uri, text, version)
        else:
            change_doc(self.client, uri, version, (None, text))
        self.versions[uri] = version
        return version

    def alive(self) -> None:
        assert self.client._server.returncode is None, "the server exited"

    def close(self) -> None:
        self.run(self._context.__aexit__(None, None, None))  # shutdown and exit: the server was serving
        self.runner.close()
        self.fake.__exit__(None, None, None)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    made: dict[str, Session] = {}

    def get(kind: str, **options) -> Session:
        if kind not in made:
            made[kind] = Session(tmp_path_factory.mktemp("fuzz-e2e"), **options)
        return made[kind]

    yield get
    for s in made.values():
        s.close()


@pytest.fixture(scope="module", autouse=True)
def tally():
    """How many answers of each kind went through the server, printed when the module ends."""
    yield
    for kind in sorted({k.split(":")[0] for k in TALLY}):
        print(f"\nfuzz e2e {kind}: {TALLY[kind + ':accepted'] + TALLY[kind + ':refused']} answers, "
              f"{TALLY[kind + ':accepted']} accepted, {TALLY[kind + ':refused']} refused")


async def history(client, thread_id: str) -> list[tuple[str, str]]:
    found = await request(client, "margin/history", {"threadId": thread_id})
    return [(m["role"], m["content"]) for m in found["messages"]]


# --- edit-ops ----------------------------------------------------------------------------------

NAMES = {A: "a.py", B: "b.py", OUTSIDE: OUTSIDE}


@st.composite
def edit_ops_case(draw):
    texts = {A: draw(document()), B: draw(document()), OUTSIDE: draw(document())}
    offsets = [i for i in range(len(texts[A]) + 1) if not inside_crlf(texts[A], i)]
    selection = tuple(sorted(draw(st.lists(st.sampled_from(offsets), min_size=2, max_size=2)))) \
        if draw(st.booleans()) else None
    cursor = draw(st.sampled_from(offsets)) if draw(st.booleans()) else None
    finish = draw(st.sampled_from(["stop"] * 12 + ["length"]))
    return texts, selection, cursor, *draw(edit_ops_answer(texts, NAMES)), finish


@FUZZ
@given(case=edit_ops_case())
def test_edit_ops_answers_through_the_server(session, case):
    s = session("edit-ops")
    s.run(_edit_ops(s, *case))
    s.alive()


async def _edit_ops(s: Session, texts, selection, cursor, answer, how, finish):
    client = s.client
    for uri, text in texts.items():
        s.show(uri, text)
    thread = (await request(client, "margin/newThread", {"textDocument": {"uri": A}}))["threadId"]
    s.fake.script(reply(answer, finish_reason=finish))
    where = {"textDocument": {"uri": A}}
    if selection:
        where["selection"] = _range(texts[A], *selection)
    if cursor is not None:
        where["position"] = _range(texts[A], cursor, cursor)["start"]
    result = await request(client, "margin/editOps", {"message": "change it", "threadId": thread, **where})
    anchor = cursor if cursor is not None else (selection[1] if selection else None)
    expected = expected_ops(answer, finish, texts, NAMES, selection, anchor, A)
    turns = await history(client, thread)
    for uri in texts:  # no file left out of the prompt (else the oracle would not know what was shown)
        assert uri in result["baseFingerprints"] or result["ops"] == []
    if expected.texts is None:
        TALLY["edit-ops:refused"] += 1
        assert result["ops"] == [] and "edit" not in result and result["assistantMessage"].strip(), how
        assert turns == []
        return
    TALLY["edit-ops:accepted"] += 1
    assert len(result["ops"]) == len(expected.reply["ops"]), how
    assert [role for role, _ in turns] == ["user", "assistant"] and turns[0][1].startswith("change it")
    assert turns[1][1] == expected.reply["assistant_message"]
    applied = len(s.client.applied_edits)
    outcome = await request(client, "margin/applyOps", {"ops": result["ops"],
                                                        "baseFingerprints": result["baseFingerprints"],
                                                        **{k: v for k, v in where.items() if k != "textDocument"}})
    if not expected.texts:  # no ops: nothing to apply
        return
    assert outcome == {"applied": True, "rebased": False, "staleFiles": []}
    (sent,) = s.client.applied_edits[applied:]
    changes = {change.text_document.uri: change for change in sent.edit.document_changes}
    assert set(changes) == set(expected.texts)
    for uri, change in changes.items():
        assert change.text_document.version == s.versions[uri]
        edits = [{"range": {"start": {"line": e.range.start.line, "character": e.range.start.character},
                            "end": {"line": e.range.end.line, "character": e.range.end.character}},
                  "newText": e.new_text} for e in change.edits]
        assert apply_lsp_edits(texts[uri], edits) == expected.texts[uri], "not exactly the validated ops"


# --- selection edits ---------------------------------------------------------------------------

@st.composite
def selection_case(draw):
    text = draw(document().filter(lambda t: len(t) > 1))
    offsets = [i for i in range(len(text) + 1) if not inside_crlf(text, i)]
    start, end = sorted(draw(st.lists(st.sampled_from(offsets), min_size=2, max_size=2, unique=True)))
    finish = draw(st.sampled_from(["stop"] * 12 + ["length"]))
    return text, start, end, *draw(selection_answer()), finish


@FUZZ
@given(case=selection_case())
def test_selection_edit_answers_through_the_server(session, case):
    s = session("selection")
    s.run(_selection(s, *case))
    s.alive()


def _range(text: str, start: int, end: int) -> dict:
    a, b = utf16_position(text, start), utf16_position(text, end)
    return {"start": {"line": a.line, "character": a.character}, "end": {"line": b.line, "character": b.character}}


async def _selection(s: Session, text, start, end, answer, how, finish):
    client = s.client
    version = s.show(A, text)
    converter = client.converter
    params = converter.structure({"textDocument": {"uri": A}, "range": _range(text, start, end),
                                  "context": {"diagnostics": []}}, types.CodeActionParams)
    offered = converter.unstructure(await request(client, "textDocument/codeAction", params))
    action = next(a for a in offered if a["data"]["kind"] == "preset")
    s.fake.script(reply(answer, finish_reason=finish))
    expected = expected_replacement(answer, finish, text, start, end)
    try:
        resolved = converter.unstructure(await request(client, "codeAction/resolve",
                                                       converter.structure(action, types.CodeAction)))
    except JsonRpcException as error:
        assert error.code == -32803 and expected is None, f"refused a valid answer ({how}): {error}"
        TALLY["selection:refused"] += 1
        return
    assert expected is not None, f"an edit from an answer that must be refused ({how})"
    TALLY["selection:accepted"] += 1
    (change,) = resolved["edit"]["documentChanges"]
    assert change["textDocument"] == {"uri": A, "version": version}
    assert apply_lsp_edits(text, change["edits"]) == expected, "not exactly the validated replacement"


# --- inline completion -------------------------------------------------------------------------

@st.composite
def completion_case(draw, answers):
    text = draw(document())
    offsets = [i for i in range(len(text) + 1) if not inside_crlf(text, i)]
    cursor = draw(st.sampled_from(offsets))
    if draw(st.integers(0, 3)) == 0:  # an auto-closed bracket after the cursor
        text, cursor = text[:cursor] + draw(st.sampled_from(["()", "[]", "('')"])) + text[cursor:], cursor + 1
    return text, cursor, draw(answers)


@FUZZ
@given(case=completion_case(hole_answer()))
def test_chat_route_completions_through_the_server(session, case):
    s = session("completion-chat")
    text, cursor, (answer, _) = case
    s.fake.script(reply(answer))
    s.run(_completion(s, text, cursor, "completion-chat"))
    s.alive()


@FUZZ
@given(case=completion_case(raw_completion()))
def test_infill_completions_through_the_server(session, case):
    s = session("completion-infill", infill=True)
    text, cursor, raw = case
    s.fake.routes["/infill"].append(status(200, {"content": raw}))
    s.run(_completion(s, text, cursor, "completion-infill"))
    assert not s.fake.routes["/infill"]  # the answer was asked for
    s.alive()


async def _completion(s: Session, text: str, cursor: int, kind: str):
    s.asked = getattr(s, "asked", 0) + 1
    text += f"\n# {s.asked}\n"  # never the text of an earlier example: no answer from the cache
    version = s.show(A, text)
    position = utf16_position(text, cursor)
    result = await request(s.client, "textDocument/inlineCompletion", {
        "textDocument": {"uri": A, "version": version}, "context": {"triggerKind": 2},
        "position": {"line": position.line, "character": position.character}})
    items = s.client.converter.unstructure(result)["items"]
    if not items:
        TALLY[kind + ":refused"] += 1
        return
    TALLY[kind + ":accepted"] += 1
    (item,) = items
    end = cursor
    if "range" in item:
        r = item["range"]
        assert (r["start"]["line"], r["start"]["character"]) == (position.line, position.character)
        assert r["end"]["line"] == position.line
        starts = line_starts(text)
        line_end = starts[position.line + 1] if position.line + 1 < len(starts) else len(text)
        end = utf16_offset(text, r["end"]["line"], r["end"]["character"])
        assert cursor <= end <= line_end
    check_suggestion(item["insertText"], text[cursor:end])
    json.dumps(item)  # the item is plain JSON


# --- summaries ---------------------------------------------------------------------------------

SUMMARISING = "You keep the running summary"
"""How the summary template's system prompt starts (prompts/summary_v1.md)."""


class SummaryRouting(FakeBackend):
    """Summary requests answered from `summaries` in order (a default note when it is empty);
    chat requests with a short reply."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.summaries: list = []
        self.summaries_asked = 0
        self.default = reply("A short answer about f.")

    def _next_step(self, body, headers):
        messages = body.get("messages") or [{}]
        if str(messages[0].get("content", "")).startswith(SUMMARISING):
            with self._lock:
                self.requests.append(body)
                self.headers.append(headers)
                self.summaries_asked += 1
                return self.summaries.pop(0) if self.summaries else reply("Notes: f in a.py returns 1.")
        return super()._next_step(body, headers)


@st.composite
def summary_answer(draw):
    """A summary as the backend may send it: streamed pieces of odd text, huge text, a cut
    stream, an HTTP error or garbage."""
    from tests.fakes.fake_openai import raw, stream

    pieces = draw(st.lists(answer_text(), min_size=0, max_size=4))
    end = draw(st.sampled_from(["stop"] * 5 + ["length", "cut", "500", "garbage"]))
    if end == "500":
        return status(500, {"error": {"message": "overloaded"}})
    if end == "garbage":
        return raw("<html>not a stream</html>", content_type="text/html")
    if end == "cut":
        return stream(pieces or ["x"], cut_after=max(len(pieces) - 1, 0))
    return stream(pieces or [""], finish_reason=end)


PER_SERVER = 10
"""summary answers given to one server, one after another"""
SERVERS = max(EXAMPLES // PER_SERVER, 3)
"""CI's 30 answers: 3 servers; the full run's 1000: 100"""


@pytest.mark.timeout(300 + 60 * SERVERS)  # each summary waits for the 2 s idle pause (services.background)
@settings(FUZZ, max_examples=SERVERS)
@given(answers=st.lists(summary_answer(), min_size=PER_SERVER, max_size=PER_SERVER))
def test_summary_answers_through_the_server(tmp_path_factory, answers):
    """A small window, so every few turns a summary is asked for in the background; whatever
    each answer is, the server serves on, the visible history is exactly the turns sent, and
    the next prompt fits its window."""
    tmp = tmp_path_factory.mktemp("fuzz-summary")
    runner = asyncio.Runner()
    log_file = tmp / "margin.log"
    with SummaryRouting(props={"default_generation_settings": {"n_ctx": 2048}},
                        models=[{"id": "fake-model", "owned_by": "llamacpp"}]) as fake:
        env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp / "t.db"),
               "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", "MARGIN_CHAT_MAX_OUTPUT_TOKENS": "64",
               "MARGIN_LOG_FILE": str(log_file)}

        async def session() -> None:
            async with margin_client(env=env, root=Path("/ws")) as client:
                open_doc(client, A, "def f():\n    return 1\n")
                fake.summaries.extend(answers)
                sent = []
                for turn in range(40 * len(answers)):
                    message = f"Turn {turn}: please look at f again. " + "Why does f return one? " * 12
                    result = await request(client, "margin/chat", {"message": message, "textDocument": {"uri": A}})
                    assert "message" not in result, result["message"]  # never over budget
                    sent.append(message)
                    while (await request(client, "margin/status", {}))["background"]:
                        await asyncio.sleep(0.01)  # the summary being written, as a person would wait
                    if fake.summaries_asked >= len(answers):
                        break
                assert fake.summaries_asked >= len(answers), "not every answer was asked for"
                thread = result["threadId"]
                assert [c for r, c in await history(client, thread) if r == "user"] == sent
                explained = await request(client, "margin/explain", {"message": "And now?", "textDocument": {"uri": A}})
                assert explained["budget"]["counted"] <= explained["budget"]["limit"]

        runner.run(session())
    runner.close()
    outcomes = [line.split(" summary ", 1)[1].split(" ", 1)[0] for line in log_file.read_text().splitlines()
                if " margin.services.summaries: summary " in line]
    assert len(outcomes) >= len(answers), outcomes
    for outcome in outcomes[:len(answers)]:
        TALLY["summary:accepted" if outcome == "stored" else "summary:refused"] += 1
