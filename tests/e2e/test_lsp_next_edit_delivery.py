"""How next edits reach the editor and what they cost, through the real margin-lsp process: a
near edit as a plain `textDocument/inlineCompletion` item with a range (no client code), the
next edit asked for by Margin itself after a pause in typing, one request in flight per document
(the older one's HTTP call aborted), and an answer made once for a state, never again."""

from __future__ import annotations

import asyncio

from tests.conftest import until
from tests.e2e.lsp_client import change_doc, open_doc
from tests.e2e.test_lsp_completion import inline, inline_params, start
from tests.e2e.test_lsp_editops import apply_text_edits
from tests.e2e.test_lsp_next_edit import AFTER, BEFORE, NEXT, A, ask, rename
from tests.fakes.fake_openai import hang, reply

ANSWER = f"```python\n{NEXT.rstrip()}\n```"
RETURN_LINE = 4
"""`    return math.pi * r * r`: where the rename on line 3 calls for the next edit"""


def on(fake, tmp_path, pause_ms: int = 0, completion: bool = False):
    return start(fake, tmp_path, MARGIN_NEXT_EDIT_ENABLED="true", MARGIN_NEXT_EDIT_PAUSE_MS=str(pause_ms),
                 MARGIN_COMPLETION_ENABLED=str(completion).lower())


async def test_a_near_edit_is_a_plain_inline_completion_item_with_its_range(fake, tmp_path):
    fake.script(reply(ANSWER))
    async with on(fake, tmp_path) as client:
        rename(client)
        near = await inline(client, inline_params(RETURN_LINE, 4, A, 6))  # before `return`
        past = await inline(client, inline_params(RETURN_LINE, 26, A, 6))  # after the edit's start
        stale = await inline(client, inline_params(RETURN_LINE, 4, A, 5))
        far = await ask(client, line=RETURN_LINE)
    (item,) = near
    assert item["range"]["start"] == {"line": RETURN_LINE, "character": 4}  # from the cursor: editors show it
    assert item["range"]["end"]["line"] == RETURN_LINE
    assert apply_text_edits(AFTER, [{"range": item["range"], "newText": item["insertText"]}]) == NEXT
    assert past == [] and stale == []  # not at or after the cursor; an old version
    assert apply_text_edits(AFTER, far["edits"]) == NEXT
    assert len(fake.requests) == 1  # made once for this state: the other three were answered from it


async def test_with_a_completion_to_show_the_next_edit_comes_after_it_and_never_delays_it(fake, tmp_path):
    check = reply("```python\nassert radius >= 0\n    \n```")
    fake.script(reply(ANSWER), check, check)
    async with on(fake, tmp_path, completion=True) as client:
        rename(client)
        made = await ask(client, line=RETURN_LINE)  # the next edit, made before the completion is asked for
        both = await inline(client, inline_params(RETURN_LINE, 4, A, 6))
        change_doc(client, A, 7, ((RETURN_LINE, 4, RETURN_LINE, 4), "\n    "))
        only = await inline(client, inline_params(RETURN_LINE + 1, 4, A, 7))
    assert made["edits"]
    first, second = both
    assert first["insertText"].startswith("assert radius >= 0")  # the completion, then the next edit already made
    assert apply_text_edits(AFTER, [{"range": second["range"], "newText": second["insertText"]}]) == NEXT
    assert [item["insertText"].startswith("assert") for item in only] == [True]  # none made for this state: not waited for
    assert len(fake.requests) == 3


async def test_margin_asks_after_a_pause_in_typing_with_one_request_in_flight_per_document(fake, tmp_path):
    fake.script(hang(60), reply(ANSWER))
    async with on(fake, tmp_path, pause_ms=500) as client:
        open_doc(client, A, BEFORE, version=1)
        for n, char in enumerate("adiu"):  # typed, then a pause: Margin asks
            change_doc(client, A, 2 + n, ((3, 10 + n, 3, 10 + n), char))
        await until(lambda: len(fake.requests) == 1, timeout=60)
        change_doc(client, A, 6, ((3, 14, 3, 14), "s"))  # typed on, and a pause: the first is aborted
        await until(lambda: len(fake.requests) == 2, timeout=60)
        await until(lambda: len(fake.disconnects) == 1, timeout=60)
        result = await ask(client)  # the editor asks at the last change: the answer is there
    assert apply_text_edits(AFTER, result["edits"]) == NEXT
    assert len(fake.requests) == 2
    assert "def area(radiu):" in fake.requests[0]["messages"][-1]["content"]


async def test_asked_twice_at_once_for_one_place_the_model_is_asked_once(fake, tmp_path):
    fake.script(reply(ANSWER))
    async with on(fake, tmp_path) as client:
        rename(client)
        one, two = await asyncio.gather(ask(client, line=RETURN_LINE), ask(client, line=RETURN_LINE))
    assert one == two and apply_text_edits(AFTER, one["edits"]) == NEXT
    assert len(fake.requests) == 1


async def test_a_request_for_another_place_aborts_the_one_in_flight(fake, tmp_path):
    fake.script(hang(60), reply(ANSWER))
    async with on(fake, tmp_path) as client:
        rename(client)
        first = asyncio.ensure_future(ask(client, line=3))
        await until(lambda: len(fake.requests) == 1, timeout=60)
        second = await ask(client, line=RETURN_LINE)
        replaced = await asyncio.wait_for(first, 60)
        await until(lambda: len(fake.disconnects) == 1, timeout=60)
    assert replaced["edits"] == [] and replaced["reason"] == "a newer request for this document replaced it"
    assert apply_text_edits(AFTER, second["edits"]) == NEXT
