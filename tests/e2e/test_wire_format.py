"""The wire format of every custom method (and the standard requests Margin answers) is a
contract: one fixed script's responses, recorded over stdio as plain JSON, must equal the
record in golden/wire.json. A deliberate change is recorded anew with
`.venv/bin/python -m tests.e2e.wire_script --write` and shows in review as a diff of that file."""

from __future__ import annotations

import json

from tests.e2e.wire_script import GOLDEN, dump, record


async def test_every_response_is_exactly_the_recorded_json(tmp_path):
    recorded = json.loads(dump(await record(tmp_path)))
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert [e["label"] for e in recorded] == [e["label"] for e in golden]
    for now, then in zip(recorded, golden):
        assert now == then, f"the response to {now['label']!r} ({now['method']}) changed"
