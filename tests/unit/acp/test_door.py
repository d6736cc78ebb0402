"""How an agent turn's events become ACP updates, and a prompt's blocks a task (margin/acp/door.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import (
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from margin.acp.door import AcpDoor, task_of
from margin.acp.sessions import Session


class Peer:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def update(self, session_id: str, update: Any) -> None:
        self.sent.append(update)


def test_a_prompt_becomes_one_task_text_with_its_attachments_named():
    task = task_of([TextContentBlock(type="text", text="fix add"),
                    EmbeddedResourceContentBlock(type="resource", resource=TextResourceContents(
                        uri="file:///p/calc.py", text="def add(a, b):\n    return a - b")),
                    ResourceContentBlock(type="resource_link", uri="file:///p/README.md", name="README.md")])
    assert task == ("fix add\n\nAttached file:///p/calc.py:\n```\ndef add(a, b):\n    return a - b\n```\n\n"
                    "(The person points at file:///p/README.md.)")


@pytest.mark.parametrize("block, named", [
    (ImageContentBlock(type="image", data="AAAA", mime_type="image/png"), "image block"),
    (EmbeddedResourceContentBlock(type="resource", resource=BlobResourceContents(uri="file:///p/a.bin", blob="AA")),
     "file:///p/a.bin is binary"),
])
def test_what_the_agent_cannot_read_is_refused_by_name(block, named):
    with pytest.raises(RequestError, match=named):
        task_of([TextContentBlock(type="text", text="look"), block])


async def test_each_call_is_a_tool_call_started_then_ended_and_the_updates_keep_their_order(tmp_path):
    peer = Peer()
    door = AcpDoor(None, peer, Session("t1", tmp_path, tmp_path.as_uri()), client_files=False)  # type: ignore[arg-type]
    door.show({"kind": "step", "step": 1, "promptTokens": 812, "window": 4096})
    door.show({"kind": "text", "step": 1, "delta": '{"tool": "read"'})
    door.show({"kind": "calling", "step": 1, "tool": "read", "args": {"path": "src/a.py", "start": 3}})
    door.show({"kind": "call", "step": 1, "tool": "read", "args": {}, "status": "done", "pointer": "[t1 read src/a.py]",
               "summary": "src/a.py lines 3-9 of 9"})
    door.show({"kind": "calling", "step": 2, "tool": "run", "args": {"command": "pytest -q"}})
    door.show({"kind": "call", "step": 2, "tool": "run", "args": {}, "status": "refused", "pointer": "", "summary": "no"})
    door.show({"kind": "told", "step": 3, "rejection": "described", "text": "Call it."})
    door.show({"kind": "final", "answer": "done", "stopped": "finished"})
    await door.settled()
    kinds = [u.session_update for u in peer.sent]
    assert kinds == ["usage_update", "agent_thought_chunk", "tool_call", "tool_call_update", "tool_call",
                     "tool_call_update", "agent_thought_chunk", "agent_message_chunk"]
    usage, _, read, read_done, run, run_done, told, final = peer.sent
    assert (usage.used, usage.size) == (812, 4096)
    assert (read.tool_call_id, read.kind, read.status, read.title) == ("s1c1", "read", "in_progress", "read src/a.py")
    assert read.locations[0].path == str(Path(tmp_path) / "src/a.py") and read.locations[0].line == 2
    assert (read_done.tool_call_id, read_done.status) == ("s1c1", "completed")
    assert read_done.content[0].content.text == "[t1 read src/a.py] src/a.py lines 3-9 of 9"
    assert (run.kind, run.locations, run_done.status) == ("execute", None, "failed")
    assert "Call it." in told.content.text and final.content.text == "done"
