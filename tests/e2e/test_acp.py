"""`margin acp` driven by the ACP Python SDK's own client (`spawn_agent_process`), as Zed or
JetBrains drive an agent: sessions that are Margin's agent threads, a turn whose every step is a
session/update, permissions with the four option kinds (granted, rejected, never answered →
the deadline), files through the client's buffers when it holds them, cancel in the middle of a
model call, the client's MCP servers (run once permitted, SSE named), and next edits over nes/*."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from acp.stdio import spawn_agent_process

from tests.fakes.fake_openai import FakeBackend, hang, reply
from tests.unit.test_cli import cli_env

CALC = "def add(a, b):\n    return a - b\n"
FAKE_MCP_SERVER = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py")
FIXED = "def add(a, b):\n    return a + b\n"
pytestmark = pytest.mark.timeout(180)


def action(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "calc.py").write_text(CALC)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def environ(fake: FakeBackend, tmp_path: Path, **extra: str) -> dict[str, str]:
    return cli_env(MARGIN_DEFAULTS_BASE_URL=fake.base_url, MARGIN_DATABASE=str(tmp_path / "t.db"),
                   MARGIN_RETRIEVAL="false", MARGIN_DEFAULTS_TOKENIZER="tiktoken:o200k_base", **extra)


class Client:
    """A scripted ACP client: permissions answered from a list ("never": not answered), files
    served from `buffers` (the editor's unsaved text) else the disk, everything recorded."""

    def __init__(self, answers: list[str] | None = None, buffers: dict[str, str] | None = None) -> None:
        self.answers = list(answers or [])
        self.buffers = buffers if buffers is not None else {}
        self.seen: list[tuple[str, Any]] = []
        """("update" | "permission" | "read" | "write", what) in arrival order"""
        self.never = asyncio.Event()
        self.after_read: Any = None
        """called after each read is answered (the person typing meanwhile)"""

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any,
                                 **_: Any) -> RequestPermissionResponse:
        self.seen.append(("permission", {"options": [o.kind for o in options], "tool_call": tool_call}))
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "never":
            await self.never.wait()  # the editor's prompt that never renders
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        chosen = next(o for o in options if o.kind == answer)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.seen.append(("update", update))

    async def read_text_file(self, path: str, session_id: str, **_: Any) -> ReadTextFileResponse:
        self.seen.append(("read", path))
        try:
            text = self.buffers[path] if path in self.buffers else Path(path).read_text()
        except FileNotFoundError:
            raise RequestError.resource_not_found(path) from None
        if self.after_read is not None:
            self.after_read(path)
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, content: str, path: str, session_id: str, **_: Any) -> WriteTextFileResponse:
        self.seen.append(("write", path))
        self.buffers[path] = content
        return WriteTextFileResponse()

    def on_connect(self, conn: Any) -> None:
        pass

    def updates(self, kind: str | None = None) -> list[Any]:
        return [u for what, u in self.seen if what == "update" and (kind is None or u.session_update == kind)]


def start(client: Client, root: Path, env: dict[str, str]):
    return spawn_agent_process(client, sys.executable, "-m", "margin.cli", "acp", env=env, cwd=str(root))


async def initialized(conn: Any, fs: bool = False) -> Any:
    caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=False)
    return await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps)


@pytest.fixture
def fake():
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 8192}},
                     models=[{"id": "fake-model", "owned_by": "llamacpp"}]) as backend:
        yield backend


async def test_a_session_reads_asks_edits_and_finishes_with_every_step_told(fake, tmp_path):
    root = project(tmp_path)
    fake.script(reply(action("read", path="src/calc.py")),
                reply(action("edit", path="src/calc.py", old="a - b", new="a + b")),
                reply(action("edit", path="src/calc.py", old="a + b", new="a * b")),
                reply(action("finish", answer="add adds now.")))
    client = Client(answers=["allow_once", "reject_once"])
    async with start(client, root, environ(fake, tmp_path)) as (conn, _process):
        init = await initialized(conn)
        assert init.protocol_version == 1 and init.agent_capabilities.load_session
        assert init.agent_capabilities.prompt_capabilities.embedded_context
        # the tests' profile names a key's variable: offered as the way to authenticate
        assert [(m.type, [v.name for v in m.vars]) for m in init.auth_methods] == [("env_var", ["FAKE_LLM_API_KEY"])]
        session = await conn.new_session(cwd=str(root), mcp_servers=[])
        assert session.modes.current_mode_id == "ask"
        assert {o.id for o in session.config_options} == {"model", "approvals"}
        done = await conn.prompt(session_id=session.session_id, prompt=[text_block("fix add")])
        arrived_before_answer = len(client.seen)
        assert done.stop_reason == "end_turn"
        assert (root / "src" / "calc.py").read_text() == FIXED  # granted once; the second edit rejected

        starts = client.updates("tool_call")
        assert [(s.kind, s.title) for s in starts] == [("read", "read src/calc.py"), ("edit", "edit src/calc.py"),
                                                      ("edit", "edit src/calc.py")]
        assert starts[0].locations[0].path == str(root / "src" / "calc.py")
        finished = {u.tool_call_id: u.status for u in client.updates("tool_call_update") if u.status}
        assert list(finished.values()) == ["completed", "completed", "failed"]
        diffs = [c for u in client.updates("tool_call_update") for c in (u.content or []) if c.type == "diff"]
        assert [(d.old_text, d.new_text) for d in diffs] == [(CALC, FIXED), (FIXED, FIXED.replace("+", "*"))]
        asked = [what for kind, what in client.seen if kind == "permission"]
        assert [a["options"] for a in asked] == [["allow_once", "allow_always", "reject_once", "reject_always"]] * 2
        assert asked[0]["tool_call"].content[0].type == "diff"
        usage = client.updates("usage_update")
        assert len(usage) == 4 and all(u.size == 8192 and 0 < u.used < u.size for u in usage)
        answer = client.updates("agent_message_chunk")
        assert answer[-1].content.text == "add adds now."
        await asyncio.sleep(0.3)
        assert len(client.seen) == arrived_before_answer  # nothing after the prompt's answer

        listed = await conn.list_sessions(cwd=str(root))
        assert [(s.session_id, s.title) for s in listed.sessions] == [(session.session_id, "fix add")]


async def test_a_permission_never_answered_expires_and_the_turn_goes_on(fake, tmp_path):
    root = project(tmp_path)
    fake.script(reply(action("read", path="src/calc.py")),
                reply(action("edit", path="src/calc.py", old="a - b", new="a + b")),
                reply(action("finish", answer="the person did not answer.")))
    client = Client(answers=["never"])
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"agentConfirmTimeoutS": 1}))
    env = environ(fake, tmp_path)
    async with spawn_agent_process(client, sys.executable, "-m", "margin.cli", "--settings", str(settings), "acp",
                                   env=env, cwd=str(root)) as (conn, _process):
        await initialized(conn)
        session = await conn.new_session(cwd=str(root), mcp_servers=[])
        done = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("fix add")]), 60)
        assert done.stop_reason == "end_turn"
        assert (root / "src" / "calc.py").read_text() == CALC
        edit = [u for u in client.updates("tool_call_update") if u.status == "failed"]
        assert "did not answer in time" in edit[0].content[0].content.text
        assert "did not answer in time" in json.dumps(fake.requests[-1]["messages"])  # the model was told


async def test_files_go_through_the_clients_buffers_and_an_edit_lands_only_on_the_text_read(fake, tmp_path):
    root = project(tmp_path)
    path = str(root / "src" / "calc.py")
    unsaved = CALC.replace("def add", "def add_numbers")
    fake.script(reply(action("read", path="src/calc.py")),
                reply(action("edit", path="src/calc.py", old="a - b", new="a + b")),
                reply(action("finish", answer="done")))
    client = Client(answers=["allow_always", "allow_once"], buffers={path: unsaved})
    async with start(client, root, environ(fake, tmp_path)) as (conn, _process):
        await initialized(conn, fs=True)
        session = await conn.new_session(cwd=str(root), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[text_block("fix add")])
        assert "def add_numbers" in json.dumps(fake.requests[1]["messages"])  # the buffer was read, not the disk
        assert client.buffers[path] == unsaved.replace("a - b", "a + b")
        assert (root / "src" / "calc.py").read_text() == CALC  # never written behind the editor's back
        assert [k for k, _ in client.seen if k in ("read", "write")] == ["read", "read", "read", "write"]

        # the person types after the edit was made and before it is written: refused, nothing lost
        typed = client.buffers[path] + "# typed\n"
        reads = [0]

        def type_on_second_read(_path: str) -> None:
            reads[0] += 1
            if reads[0] == 2:  # the model's read, the edit's own read — then the typing
                client.buffers[path] = typed

        client.after_read = type_on_second_read
        fake.script(reply(action("read", path="src/calc.py")),
                    reply(action("edit", path="src/calc.py", old="a + b", new="a * b")), reply(action("finish", answer="x")))
        await conn.prompt(session_id=session.session_id, prompt=[text_block("multiply")])
        assert client.buffers[path] == typed
        assert "changed in the editor since it was read" in json.dumps(fake.requests[-1]["messages"])


async def test_cancel_aborts_the_model_call_and_the_prompt_answers_cancelled(fake, tmp_path):
    root = project(tmp_path)
    fake.script(reply(action("read", path="src/calc.py")), hang(60))
    client = Client()
    async with start(client, root, environ(fake, tmp_path)) as (conn, _process):
        await initialized(conn)
        session = await conn.new_session(cwd=str(root), mcp_servers=[])
        running = asyncio.ensure_future(conn.prompt(session_id=session.session_id, prompt=[text_block("fix add")]))
        while len(fake.requests) < 2:
            await asyncio.sleep(0.01)
        await conn.cancel(session_id=session.session_id)
        done = await asyncio.wait_for(running, 30)
        assert done.stop_reason == "cancelled"
        for _ in range(500):
            if fake.disconnects:
                break
            await asyncio.sleep(0.02)
        assert fake.disconnects  # the model call was aborted, not left running

        # the session goes on, and loads elsewhere with its steps
        fake.script(reply(action("finish", answer="went on")))
        again = await conn.prompt(session_id=session.session_id, prompt=[text_block("go on")])
        assert again.stop_reason == "end_turn"
    other = Client()
    async with start(other, root, environ(fake, tmp_path)) as (conn, _process):
        await initialized(conn)
        await conn.load_session(cwd=str(root), session_id=session.session_id, mcp_servers=[])
        said = [u.content.text for u in other.updates("user_message_chunk")]
        assert said == ["fix add", "go on"]
        assert [u.title for u in other.updates("tool_call")] == ["t1 read src/calc.py"]
        assert other.updates("agent_message_chunk")[-1].content.text == "went on"


async def test_the_clients_mcp_servers_run_once_permitted_and_those_that_cannot_are_named(fake, tmp_path):
    """session/new's mcpServers are the agent's tools (#50): each asked about through
    session/request_permission before it first runs (a refused one never runs), its tool called
    with permission; an SSE server (a transport Margin does not speak) is named, never dropped
    silently. Bad input is named too."""
    root = project(tmp_path)
    client = Client(answers=["allow_once", "reject_once", "allow_once"])
    async with start(client, root, environ(fake, tmp_path)) as (conn, _process):
        await initialized(conn)
        from acp.schema import EnvVariable, McpServerStdio, SseMcpServer
        marker = tmp_path / "started"
        servers = [McpServerStdio(name="fake tools", command=sys.executable, args=[FAKE_MCP_SERVER],
                                  env=[EnvVariable(name="FAKE_MCP_VARIANT", value="acp")]),
                   McpServerStdio(name="toucher", command="touch", args=[str(marker)], env=[]),
                   SseMcpServer(name="old-sse", url="http://127.0.0.1:9/sse", headers=[], type="sse")]
        with_servers = await conn.new_session(cwd=str(root), mcp_servers=servers)
        assert with_servers.field_meta == {"margin": {"mcpServersNotStarted": [
            "old-sse (SSE, which Margin does not speak: give it a Streamable HTTP URL)"]}}
        fake.script(reply(action("fake-tools__echo", text="said through acp")), reply(action("finish", answer="ok")))
        await conn.prompt(session_id=with_servers.session_id, prompt=[text_block("hello")])
        asked = [what["tool_call"].title for kind, what in client.seen if kind == "permission"]
        assert asked == ["start MCP server fake-tools", "start MCP server toucher", "call fake-tools__echo"]
        said = [u.content.text for u in client.updates("agent_message_chunk")]
        assert said[0].startswith("(MCP servers not started: old-sse (SSE")
        assert "fake-tools__echo {" in json.dumps(fake.requests[0]["messages"])
        assert "said through acp" in json.dumps(fake.requests[1]["messages"]).split("output of fake-tools__echo")[1]
        assert not marker.exists()  # refused: never run
        with pytest.raises(RequestError, match="absolute path"):
            await conn.new_session(cwd="relative/dir", mcp_servers=[])
        session = await conn.new_session(cwd=str(root), mcp_servers=[])
        with pytest.raises(RequestError, match="no mode"):
            await conn.set_session_mode(session_id=session.session_id, mode_id="yolo")
        from acp.schema import ImageContentBlock
        with pytest.raises(RequestError, match="image block"):
            await conn.prompt(session_id=session.session_id,
                              prompt=[ImageContentBlock(type="image", data="AAAA", mime_type="image/png")])


async def test_modes_options_close_and_delete(fake, tmp_path):
    root = project(tmp_path)
    client = Client(answers=["allow_always", "allow_once"])
    async with start(client, root, environ(fake, tmp_path)) as (conn, _process):
        await initialized(conn)
        session = await conn.new_session(cwd=str(root), mcp_servers=[])
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        fake.script(reply(action("read", path="src/calc.py")),
                    reply(action("edit", path="src/calc.py", old="a - b", new="a + b")), reply(action("finish", answer="no")))
        await conn.prompt(session_id=sid, prompt=[text_block("fix add")])
        assert not [k for k, _ in client.seen if k == "permission"]  # refused without asking
        assert "not allowed in this run (read-only)" in json.dumps(fake.requests[-1]["messages"])

        await conn.set_session_mode(session_id=sid, mode_id="ask")
        options = await conn.set_config_option(session_id=sid, config_id="approvals", value="ask")
        assert {o.id: o.current_value for o in options.config_options}["approvals"] == "ask"
        flip = {"path": "src/calc.py", "old": "a - b", "new": "a + b"}
        back = {"path": "src/calc.py", "old": "a + b", "new": "a - b"}
        for args in (flip, back, flip):  # "always" is not remembered while approvals is `ask`
            fake.script(reply(action("read", path="src/calc.py")), reply(action("edit", **args)),
                        reply(action("finish", answer="ok")))
            client.answers = ["allow_always"]
            await conn.prompt(session_id=sid, prompt=[text_block("flip")])
        assert len([k for k, _ in client.seen if k == "permission"]) == 3
        assert (root / "src" / "calc.py").read_text() == FIXED
        with pytest.raises(RequestError, match="no option"):
            await conn.set_config_option(session_id=sid, config_id="temperature", value="hot")

        await conn.close_session(session_id=sid)
        with pytest.raises(RequestError):
            await conn.prompt(session_id=sid, prompt=[text_block("after close")])
        await conn.resume_session(session_id=sid, cwd=str(root))  # a closed session resumes
        await conn._conn.send_request("session/delete", {"sessionId": sid})  # not in the SDK's client
        assert (await conn.list_sessions(cwd=str(root))).sessions == []
        with pytest.raises(RequestError):
            await conn.load_session(session_id=sid, cwd=str(root))


async def test_next_edits_over_nes_from_document_events_and_a_rejected_one_is_not_offered_again(fake, tmp_path):
    root = project(tmp_path)
    before = ("import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\n"
              "def perimeter(r):\n    return 2 * math.pi * r\n")
    after = before.replace("def area(r):", "def area(radius):")
    wanted = after.replace("math.pi * r * r", "math.pi * radius * radius")
    uri = (root / "geometry.py").as_uri()
    fake.script(reply(f"```python\n{wanted.rstrip()}\n```"))
    client = Client()
    async with start(client, root, environ(fake, tmp_path, MARGIN_NEXT_EDIT_ENABLED="true")) as (conn, _process):
        init = await initialized(conn)
        assert init.agent_capabilities.nes.events.document.did_change.sync_kind == "incremental"
        raw = conn._conn  # nes/* and document/* are unstable: the SDK's client has no methods for them
        await raw.send_notification("margin/unknown", {"anything": 1})  # ignored, never fatal
        started = await raw.send_request("nes/start", {"workspaceUri": root.as_uri(), "unknownField": True})
        nes = started["sessionId"]
        await raw.send_notification("document/didOpen", {"sessionId": nes, "uri": uri, "languageId": "python",
                                                         "version": 1, "text": before})
        for n, char in enumerate("adius"):  # the person types `r` → `radius`, a key at a time
            at = {"line": 3, "character": 10 + n}
            await raw.send_notification("document/didChange", {"sessionId": nes, "uri": uri, "version": 2 + n,
                                                               "contentChanges": [{"range": {"start": at, "end": at},
                                                                                   "text": char}]})
        asked = {"sessionId": nes, "uri": uri, "version": 6, "position": {"line": 3, "character": 15},
                 "triggerKind": "automatic"}
        found = await raw.send_request("nes/suggest", asked)
        (suggestion,) = found["suggestions"]
        assert suggestion["kind"] == "edit" and suggestion["uri"] == uri
        lines = after.split("\n")
        for edit in reversed(suggestion["edits"]):
            first, last = edit["range"]["start"], edit["range"]["end"]
            assert first["line"] == last["line"]
            line = lines[first["line"]]
            lines[first["line"]] = line[:first["character"]] + edit["newText"] + line[last["character"]:]
        assert "\n".join(lines) == wanted
        assert "before:\n```\ndef area(r):\n```\nafter:\n```\ndef area(radius):\n```" in \
            fake.requests[0]["messages"][-1]["content"]  # the next-edit service's own prompt

        calls = len(fake.requests)
        await raw.send_notification("nes/reject", {"sessionId": nes, "id": suggestion["id"], "reason": "rejected"})
        again = await raw.send_request("nes/suggest", asked)
        assert again["suggestions"] == [] and len(fake.requests) == calls  # not offered again, not asked again
        stale = await raw.send_request("nes/suggest", {**asked, "version": 5})
        assert stale["suggestions"] == []
        await raw.send_request("nes/close", {"sessionId": nes})
        with pytest.raises(RequestError):
            await raw.send_request("nes/suggest", asked)


async def test_the_client_is_never_asked_for_a_file_margin_would_not_read(fake, tmp_path):
    """A model's path can name a file outside the session's folder, or one git ignores (`.env`):
    the workspace rule refuses it before the client is asked, so the editor never reads it for
    the model either."""
    root = project(tmp_path)
    (root / ".gitignore").write_text(".env\n")
    (root / ".env").write_text("TOKEN=secret-value-123456\n")
    (tmp_path / "outside.txt").write_text("outside-text-987654\n")
    fake.script(reply(action("read", path=".env")), reply(action("read", path="../outside.txt")),
                reply(action("read", path=str(tmp_path / "outside.txt"))),
                reply(action("edit", path="../outside.txt", old="outside", new="inside")),
                reply(action("finish", answer="nothing read")))
    client = Client(answers=["allow_once"] * 4)
    async with start(client, root, environ(fake, tmp_path)) as (conn, _process):
        await initialized(conn, fs=True)
        session = await conn.new_session(cwd=str(root), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[text_block("read them")])
    assert [what for kind, what in client.seen if kind in ("read", "write", "permission")] == []
    sent = json.dumps(fake.requests)
    assert "secret-value-123456" not in sent and "outside-text-987654" not in sent
    assert "ignored by git" in sent and "not a file inside the workspace" in sent
    assert (tmp_path / "outside.txt").read_text() == "outside-text-987654\n"


async def test_authenticate_checks_the_key_variable_and_margin_lsp_acp_is_the_same_agent(fake, tmp_path):
    root = project(tmp_path)
    client = Client()
    async with spawn_agent_process(client, sys.executable, "-m", "margin.lsp.main", "--acp",
                                   env=environ(fake, tmp_path), cwd=str(root)) as (conn, _process):
        init = await initialized(conn)
        assert init.agent_info.name == "margin-lsp"
        (method,) = init.auth_methods
        await conn.authenticate(method_id=method.id)  # the variable is set
        with pytest.raises(RequestError, match="no auth method"):
            await conn.authenticate(method_id="agent")
    async with start(client, root, environ(fake, tmp_path, FAKE_LLM_API_KEY="")) as (conn, _process):
        await initialized(conn)
        with pytest.raises(RequestError) as unset:
            await conn.authenticate(method_id=method.id)
        assert unset.value.code == -32000 and "FAKE_LLM_API_KEY is not set" in json.dumps(unset.value.data)
