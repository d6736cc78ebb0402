"""Threads stored by Margin 0.1.0, when file contexts were seed 000's JSON envelopes, keep
working: they load, the next turn shows every file as a file block (an unchanged file's stored
context re-rendered, not resent; a changed file sent anew), and storage is never rewritten.

tests/fixtures/data/threads-0.1.0.db was written by the release before file blocks (commit
fa825bd): one chat turn in workspace file:///ws with a.py (CRLF, emoji) and b.py (no final
newline) open."""

from __future__ import annotations

import shutil
from pathlib import Path

from margin.core.file_block import ENVELOPE_TYPE, parse_file_blocks
from margin.core.vfs import fingerprint
from margin.core.where import Where
from margin.services.chat import Ask
from tests.fakes.fake_provider import FakeProvider, close, fake_services

OLD_DATABASE = Path(__file__).parents[2] / "fixtures" / "data" / "threads-0.1.0.db"
A, B = "file:///ws/a.py", "file:///ws/b.py"
A_TEXT = "def f():\r\n    return '😀'\r\n"
B_TEXT = "def g():\n    return 1"


async def test_an_old_thread_loads_and_its_next_turn_shows_files_as_blocks(tmp_path):
    database = tmp_path / "threads.db"
    shutil.copy(OLD_DATABASE, database)
    provider = FakeProvider()
    services = fake_services(tmp_path, provider, MARGIN_DATABASE=str(database))
    try:
        history = await services.threads.history(Where(A))
        assert [(m.role, m.content) for m in history.messages] == [
            ("user", "what do f and g return?"), ("assistant", "ok")]
        stored = await services.threads.timeline(history.thread.id)
        assert [m.meta["file_id"] for m in stored if m.hidden] == ["a.py", "b.py"]

        services.app.files.open(A, "python", 1, A_TEXT)  # unchanged since the old turn
        services.app.files.open(B, "python", 2, B_TEXT + "\n")  # changed
        outcome = await services.chat.chat(Ask("and now?", Where(A)))
        (request,) = provider.requests
        prompt = "\n".join(m.content for m in request.messages)
        assert ENVELOPE_TYPE not in prompt  # no JSON envelope reaches the model any more
        blocks = {b.file_id: b for b in parse_file_blocks(prompt)}
        assert blocks["a.py"].text == A_TEXT and blocks["b.py"].text == B_TEXT + "\n"
        assert outcome.budget.section("history").kept >= 1  # a.py's old context was kept, re-rendered
        assert [s.name for s in outcome.budget.sections if s.name == "files"] == ["files"]
        assert outcome.budget.section("files").kept == 1  # only b.py was sent anew

        after = await services.threads.timeline(history.thread.id)
        contexts = {m.meta["file_id"]: m for m in after if m.hidden}
        assert contexts["a.py"].fingerprint == fingerprint(A_TEXT)
        assert contexts["b.py"].fingerprint == fingerprint(B_TEXT + "\n")
        raw = await services.app.storage.run(lambda store: store.messages(history.thread.id))
        old_a = next(m for m in raw if m.hidden and m.meta.get("file_id") == "a.py")
        assert old_a.content.startswith('{"type": "virtual_file_context"')  # stored as it was written
        new_b = next(m for m in reversed(raw) if m.hidden and m.meta.get("file_id") == "b.py")  # the old one stays
        assert new_b.content.startswith("File b.py (python, sha256:")
    finally:
        await close(services)
