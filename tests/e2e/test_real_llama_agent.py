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


async def test_gemma_through_acp_one_turn_every_step_told_within_the_window(llama_server, tmp_path):
    """The same turn through `margin acp` and the ACP Python SDK's client: the window each step
    reports is the one the server serves, every step within it, the turn ends with an answer of
    its own kind, and the file changes only by an edit the client allowed."""
    import sys

    from acp import text_block
    from acp.stdio import spawn_agent_process

    from tests.e2e import test_acp

    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    env = test_acp.cli_env(MARGIN_DEFAULTS_BASE_URL=llama_server.base_url, MARGIN_DATABASE=str(tmp_path / "t.db"),
                           MARGIN_RETRIEVAL="false", MARGIN_AGENT_MAX_OUTPUT_TOKENS="96", MARGIN_AGENT_TEMPERATURE="0")
    client = test_acp.Client(answers=["reject_once"] * 8)
    async with spawn_agent_process(client, sys.executable, "-m", "margin.cli", "acp", env=env,
                                   cwd=str(root)) as (conn, _process):
        await test_acp.initialized(conn)
        session = await conn.new_session(cwd=str(root), mcp_servers=[])
        done = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[
            text_block("Read calc.py, then fix the function add so that it adds.")]), 900)

    assert done.stop_reason in ("end_turn", "max_turn_requests")
    usage = client.updates("usage_update")
    assert 1 <= len(usage) <= 8 and all(0 < u.used < u.size for u in usage)  # 270M: the small cap
    assert len({u.size for u in usage}) == 1 and usage[0].size >= 2048  # the served window, read from the server
    assert client.updates("agent_message_chunk")  # the turn ended with something said
    assert (root / "calc.py").read_text() == CALC  # every edit rejected: never written


@pytest.mark.parametrize("share", ["1", "0.05"], ids=["schemas-in-the-grammar", "meta-tool"])
async def test_gemma_with_a_real_mcp_servers_tools_every_step_parses_and_the_turn_ends(llama_server, tmp_path, share):
    """#50 on the real server: server-filesystem's 14 tools offered to Gemma 3 270M — their
    schemas inside the action schema llama.cpp turns into a grammar (share 1), or the `mcp`
    meta-tool (the default share: they take more than 5% of the 4,096-token window). The server
    must take the grammar (a schema it cannot is a failed step), and the turn end within its cap."""
    import json

    from tests.unit.test_cli import margin

    done = subprocess.run(["bash", "scripts/install-mcp-tools.sh", "--check"], capture_output=True, text=True)
    assert done.returncode == 0, "run scripts/install-mcp-tools.sh"
    tools = done.stdout.strip()
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("the release is on Thursday\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    servers = {"fs": {"command": f"{tools}/bin/node",
                      "args": [f"{tools}/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", str(root)]}}
    env = {"MARGIN_DEFAULTS_BASE_URL": llama_server.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_RETRIEVAL": "false", "MARGIN_AGENT_MAX_OUTPUT_TOKENS": "96", "MARGIN_AGENT_TEMPERATURE": "0",
           "MARGIN_MCP_SERVERS": json.dumps(servers), "MARGIN_MCP_TOOLS_SHARE": share}
    assert margin("mcp", "approve", "fs", "--yes", env=env, cwd=root).returncode == 0
    async with margin_client(env=env, root=root, capabilities=EDITOR) as client:
        editor = attach(client)
        editor.events["t"] = []
        result = await asyncio.wait_for(request(client, "margin/agent", {
            "task": "When is the release? The answer is in notes.txt.", "partialResultToken": "t"}), 900)
    assert result["protocol"] == "json"
    assert result["stopped"] in ("finished", "step cap", "stuck"), result["why"]  # never "model failed"
    for step in result["steps"]:
        assert step["calls"] or step["told"] or step is result["steps"][-1]
        assert step["promptTokens"] <= result["limit"]
    sections = {s["name"]: s for s in result["budget"]["sections"]}
    assert sections["mcp tools"]["kept"] == (14 if share == "1" else 1)


def test_margin_eval_agent_on_gemma_parses_every_step_ends_within_its_caps_and_never_hangs(llama_server, tmp_path):
    """#51's fixed sample on the real Gemma 3 270M, JSON actions: a model this small solves little;
    every turn must end by its own rules (never a failed model step, never hung), and both sides
    be judged by the hidden tests."""
    import json

    from tests.unit.test_cli import margin

    results = tmp_path / "agent.jsonl"
    done = margin("eval", "agent", "--task", "08-last-booking-slot", "--task", "24-grades-empty-course",
                  "--endpoint", llama_server.base_url, "--max-tokens", "128", "--turn-timeout", "300",
                  "--results", str(results), env={"MARGIN_DATABASE": str(tmp_path / "t.db")}, timeout=900)
    assert done.returncode in (0, 1), done.stderr  # 1: agent mode passed fewer than one-shot (said so)
    assert "agent mode" in done.stdout and "one-shot (edit-ops)" in done.stdout
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [row["task"] for row in rows] == ["08-last-booking-slot", "24-grades-empty-course"]
    for row in rows:
        agent = row["agent"]
        assert not agent["hung"] and agent["stopped"] in ("finished", "step cap", "stuck"), agent
        assert 1 <= agent["steps"] <= 8 and agent["prompt_tokens"] > 0  # the small model's cap
