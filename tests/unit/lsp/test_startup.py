"""Start-up stays lean: margin-lsp answers `initialize` before importing what it does not need
for that (margin.deferred) — pydantic and the settings models included: the reply reads the one
setting it needs unvalidated (margin.core.settings_preread) — and loads it right after. Checked
by what is imported, never by a time, so the check cannot flake on a loaded machine
(benchmarks/bench_startup.py measures)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from margin import deferred
from tests.conftest import clean_env

SERVER = Path(deferred.__file__).parent

HEAVY = ("httpx", "aiosqlite", "tiktoken", "mistral_common", "pathspec", "sqlite3", "margin.services.registry",
         "margin.lsp.wire", "margin.core.prompts", "pydantic", "pydantic_core", "margin.core.settings",
         "margin.core.settings_state")
"""Not needed to answer `initialize`: none may be imported before the reply (pygls and lsprotocol
import no pydantic: its absence here is Margin's doing)."""

# The server as `margin-lsp` runs it, over pipes: what is imported is recorded when the
# `initialize` reply is written, and again once the warm-up thread has finished. Its argument:
# the initializationOptions, as JSON.
SCRIPT = """
import io, json, sys, threading
from margin.lsp import main as entry

options = json.loads(sys.argv[1])

def message(body):
    data = json.dumps(body).encode()
    return b"Content-Length: %d\\r\\n\\r\\n" % len(data) + data

requests = message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "processId": None, "rootUri": None, "capabilities": {"general": {"positionEncodings": ["utf-8"]}},
    "initializationOptions": options}})
requests += message({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
requests += message({"jsonrpc": "2.0", "method": "exit"})

class Out(io.BytesIO):
    replies = []
    def write(self, data):
        if not Out.replies:  # the initialize reply
            Out.at_reply = sorted(sys.modules)
        Out.replies.append(data)
        return len(data)

sys.argv = ["margin-lsp"]
try:
    from margin.lsp.server import MarginLanguageServer
    start = MarginLanguageServer.start_io
    MarginLanguageServer.start_io = lambda self, *_: start(self, io.BytesIO(requests), Out())
    entry.main()
except SystemExit:
    pass
warm = next((t for t in threading.enumerate() if t.name == "margin-warm-up"), None)
if warm is not None:
    warm.join(60)
reply = json.loads(Out.replies[0].split(b"\\r\\n\\r\\n", 1)[1])
print(json.dumps({"at_reply": Out.at_reply, "after": sorted(sys.modules), "reply": reply}))
"""


def run_server_to_initialize(tmp_path: Path, options: object = None, **env_vars: str) -> dict:
    env = clean_env(MARGIN_DEFAULTS_BASE_URL="http://127.0.0.1:9/v1", MARGIN_DATABASE=str(tmp_path / "t.db"),
                    MARGIN_LOG_LEVEL="WARNING", **env_vars)
    if options is None:
        options = {"margin": {"completionMenu": True}}
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(options)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_initialize_is_answered_before_the_heavy_modules_load_and_they_load_right_after(tmp_path):
    seen = run_server_to_initialize(tmp_path)
    reply = seen["reply"]["result"]
    # The reply is whole: the settings from initializationOptions applied (completionMenu adds
    # completion), the encoding negotiated, Margin's commands and methods advertised.
    capabilities = reply["capabilities"]
    assert capabilities["positionEncoding"] == "utf-8"
    assert "completionProvider" in capabilities
    assert "inlineCompletionProvider" in capabilities
    assert {"margin.applyOps", "margin.editSelection"} <= set(capabilities["executeCommandProvider"]["commands"])
    assert "margin/chat" in capabilities["experimental"]["margin"]["methods"]

    def loaded(modules: list[str]) -> set[str]:
        return {name for name in HEAVY if name in modules}

    assert loaded(seen["at_reply"]) == set(), "imported before the initialize reply"
    assert set(deferred.WARM_UP) <= set(seen["after"]), "the warm-up after initialize left these out"


@pytest.mark.parametrize(("options", "env", "advertised"), [
    ({"completionMenu": True}, {}, True),                                  # plain, not in a `margin` section
    ({"margin": {"completionMenu": "on"}}, {}, True),                      # a word pydantic reads as true
    ({"margin": {"completionMenu": "maybe"}}, {}, False),                  # invalid: off (told at initialized)
    ({"margin": {"completionMenu": True}}, {"MARGIN_COMPLETION_MENU": "false"}, False),  # the environment wins
    ({"margin": {}}, {"MARGIN_COMPLETION_MENU": "1"}, True),
    ({"margin": {"completionMenu": True}}, {"MARGIN_COMPLETION_MENU": "nope"}, True),  # invalid: not set
])
def test_the_completion_menu_setting_is_read_for_the_reply_without_pydantic(tmp_path, options, env, advertised):
    seen = run_server_to_initialize(tmp_path, options, **env)
    assert ("completionProvider" in seen["reply"]["result"]["capabilities"]) is advertised
    assert {"pydantic", "margin.core.settings"} & set(seen["at_reply"]) == set()


def test_every_deferred_module_is_warmed_up():
    """`deferred.module(name)` anywhere in the server names a module in deferred.WARM_UP, so the
    first request that uses it finds it loaded: one place says what loads later."""
    named = set()
    for path in SERVER.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "module"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "deferred"):
                named.add(node.args[0].value)  # type: ignore[attr-defined]
    assert named, "no deferred modules found: the scan is broken"
    assert named - set(deferred.WARM_UP) == set()


def test_a_deferred_module_loads_on_first_use():
    proxy = deferred.module("json")
    assert proxy.dumps([1]) == "[1]"
