"""One agent core, three doors: the same scripted trajectory through the language server's
`margin/agent`, the terminal's `margin agent` and `margin acp` makes the same tool calls, sends
the model the same requests (so the same prompt token counts), and leaves the same file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from acp import text_block
from acp.stdio import spawn_agent_process

from tests.e2e import test_acp
from tests.e2e.agent_editor import attach
from tests.e2e.lsp_client import margin_client, request
from tests.e2e.test_agent_cli import in_terminal
from tests.fakes.fake_openai import FakeBackend, reply

pytestmark = pytest.mark.timeout(240)
CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


def trajectory() -> list:
    act = test_acp.action
    return [reply(act("list", path=".")), reply(act("read", path="calc.py")),
            reply(act("search", query="return a")), reply(act("edit", path="calc.py", old="a - b", new="a + b")),
            reply(act("read", path="calc.py")), reply(act("finish", answer="add adds now."))]


def backend() -> FakeBackend:
    return FakeBackend(props={"default_generation_settings": {"n_ctx": 8192}},
                       models=[{"id": "fake-model", "owned_by": "llamacpp"}])


def env(fake: FakeBackend, db: Path) -> dict[str, str]:
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(db), "MARGIN_RETRIEVAL": "false",
            "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base"}


def the_same_request(body: dict) -> dict:
    """What a door could change in a request: every part but the sampling."""
    return {key: body.get(key) for key in ("messages", "tools", "response_format", "max_tokens", "model")}


async def test_the_same_trajectory_through_lsp_terminal_and_acp_makes_the_same_calls_and_prompts(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    seen: dict[str, list[dict]] = {}
    calls: dict[str, list[tuple[str, str]]] = {}
    tokens: dict[str, list[int]] = {}

    # the language server (an editor that applies edits; asked apart, answered Accept)
    (root / "calc.py").write_text(CALC)
    with backend() as fake:
        fake.script(*trajectory())
        async with margin_client(env=env(fake, tmp_path / "lsp.db"), root=root,
                                 capabilities=lsp_editor()) as client:
            editor = attach(client)
            result = await request(client, "margin/agent", {"task": "fix add", "partialResultToken": "p"})
        assert result["stopped"] == "finished" and len(editor.asked) == 1
        seen["lsp"] = [the_same_request(b) for b in fake.requests]
        calls["lsp"] = [(c["tool"], c["status"]) for s in result["steps"] for c in s["calls"] if c["tool"] != "finish"]
        tokens["lsp"] = [s["promptTokens"] for s in result["steps"]]
    assert (root / "calc.py").read_text() == FIXED

    # the terminal (a real pseudo-terminal, the edit answered yes)
    (root / "calc.py").write_text(CALC)
    with backend() as fake:
        fake.script(*trajectory())
        code, _out, err = in_terminal(["agent", "fix add"], "y\n", env(fake, tmp_path / "cli.db"), root)
        assert code == 0, err
        seen["terminal"] = [the_same_request(b) for b in fake.requests]
        calls["terminal"] = [(line.split(" · ")[1].split()[0], line.rsplit("→ ", 1)[1])
                             for line in err.splitlines() if " · " in line and "→" in line]
    assert (root / "calc.py").read_text() == FIXED

    # ACP (the Python SDK's client; the edit allowed once)
    (root / "calc.py").write_text(CALC)
    with backend() as fake:
        fake.script(*trajectory())
        client_ = test_acp.Client(answers=["allow_once"])
        async with spawn_agent_process(client_, sys.executable, "-m", "margin.cli", "acp",
                                       env=test_acp.cli_env(**env(fake, tmp_path / "acp.db")),
                                       cwd=str(root)) as (conn, _process):
            await test_acp.initialized(conn)
            session = await conn.new_session(cwd=str(root), mcp_servers=[])
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("fix add")])
        assert done.stop_reason == "end_turn"
        seen["acp"] = [the_same_request(b) for b in fake.requests]
        starts = client_.updates("tool_call")
        ends = [u for u in client_.updates("tool_call_update") if u.status]
        calls["acp"] = [(s.title.split()[0], {"completed": "done", "failed": "failed"}[e.status])
                        for s, e in zip(starts, ends, strict=True)]
        tokens["acp"] = [u.used for u in client_.updates("usage_update")]
    assert (root / "calc.py").read_text() == FIXED

    assert len(seen["lsp"]) == 6
    assert seen["terminal"] == seen["lsp"] and seen["acp"] == seen["lsp"]  # the same prompts, byte for byte
    assert calls["lsp"] == [("list", "done"), ("read", "done"), ("search", "done"), ("edit", "done"), ("read", "done")]
    assert calls["terminal"] == calls["lsp"] and calls["acp"] == calls["lsp"]
    assert tokens["acp"] == tokens["lsp"] and all(tokens["lsp"])  # each step counted the same, exactly


def lsp_editor():
    from tests.e2e.test_lsp_agent import EDITOR

    return EDITOR
