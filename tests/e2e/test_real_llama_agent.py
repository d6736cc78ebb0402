"""The agent on the real llama.cpp server with Gemma 3 270M, through the real margin-lsp process.
Its chat template takes no tools, so the agent acts by one JSON action a step, held to the action
schema by the server's grammar. A model this small rarely does the task; what must hold is the
agent's part: every answer ends as a call that ran, a final answer, or a rejection told back
(never nothing), the turn ends within the small-model cap without hanging, every prompt within
the served window, and the file is never written but through a confirmed edit."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from tests.e2e.agent_editor import attach
from tests.e2e.lsp_client import margin_client, request
from tests.e2e.test_lsp_agent import EDITOR

pytestmark = pytest.mark.llama

CALC = "def add(a, b):\n    return a - b\n"


async def test_gemma_acts_by_json_actions_and_the_turn_ends_within_its_cap(llama_server, tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    uri = (root / "calc.py").as_uri()
    env = {"MARGIN_DEFAULTS_BASE_URL": llama_server.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_RETRIEVAL": "false", "MARGIN_AGENT_MAX_OUTPUT_TOKENS": "96", "MARGIN_AGENT_TEMPERATURE": "0"}
    async with margin_client(env=env, root=root, capabilities=EDITOR) as client:
        editor = attach(client)
        editor.open(uri, CALC)
        editor.events["t"] = []
        result = await asyncio.wait_for(request(client, "margin/agent", {
            "task": "Read calc.py, then fix the function add so that it adds.", "textDocument": {"uri": uri},
            "partialResultToken": "t"}), 900)

    assert result["protocol"] == "json"
    assert result["stopped"] in ("finished", "step cap", "stuck") and len(result["steps"]) <= 8  # 270M: the small cap
    for step in result["steps"]:
        assert step["calls"] or step["told"] or step is result["steps"][-1]  # never an answer that came to nothing
        assert step["promptTokens"] <= result["limit"] < result["window"]
    assert [e for e in editor.events["t"] if e["kind"] == "final"]
    # Only a confirmed edit reached the buffer; the disk was never written.
    assert len(editor.edits) == len(result["edits"]) and len(editor.asked) >= len(result["edits"])
    assert (root / "calc.py").read_text() == CALC
