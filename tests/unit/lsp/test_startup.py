"""Start-up stays lean: margin-lsp answers `initialize` before importing what it does not need
for that (margin.deferred) — pydantic and the settings models included: the reply reads the one
setting it needs unvalidated (margin.core.settings_preread) — and loads it right after. Checked
by what is imported, never by a time, so the check cannot flake on a loaded machine
(benchmarks/bench_startup.py measures)."""

from __future__ import annotations

import ast
import builtins
import importlib
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
import gc
print(json.dumps({"at_reply": Out.at_reply, "after": sorted(sys.modules), "reply": reply,
                  "frozen": gc.get_freeze_count(), "collectable": len(gc.get_objects())}))
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
    # What start-up made is out of the cyclic collector's view (gc.freeze): a full collection
    # walks what came after it, not the tens of thousands of objects of the modules.
    assert seen["frozen"] > 20_000 and seen["collectable"] < seen["frozen"] / 4, seen["frozen"]


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


def deferred_imports(tree: ast.AST) -> set[str]:
    """The modules imported in `with deferred.imports():` blocks."""
    named = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
                isinstance(item.context_expr, ast.Call) and ast.unparse(item.context_expr.func) == "deferred.imports"
                for item in node.items):
            for statement in node.body:
                if isinstance(statement, ast.Import):
                    named |= {alias.name for alias in statement.names}
                elif isinstance(statement, ast.ImportFrom):
                    named |= {f"{statement.module}.{alias.name}" for alias in statement.names}
    return named


def test_every_deferred_module_is_warmed_up():
    """A module imported in `deferred.imports()` anywhere in the server is named in
    deferred.WARM_UP, so the first request that uses it finds it loaded: one place says what
    loads later."""
    named = set()
    for path in SERVER.rglob("*.py"):
        named |= deferred_imports(ast.parse(path.read_text(), str(path)))
    assert len(named) > 20, f"the scan is broken: it found only {sorted(named)}"
    assert named - set(deferred.WARM_UP) == set()


def test_deferred_imports_bind_stand_ins_that_load_on_first_use_and_then_step_aside(tmp_path, monkeypatch):
    package = tmp_path / "deferred_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "heavy.py").write_text("LOADED = True\ndef twice(x):\n    return 2 * x\n")
    (package / "user.py").write_text(
        "from margin import deferred\n"
        "with deferred.imports():\n"
        "    import json\n"
        "    from deferred_pkg import heavy\n"
        "    from deferred_pkg import heavy as also_heavy\n"
        "def use():\n"
        "    return heavy.twice(21)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(deferred, "WARM_UP", (*deferred.WARM_UP, "deferred_pkg.heavy"))
    user = importlib.import_module("deferred_pkg.user")
    try:
        assert "deferred_pkg.heavy" not in sys.modules  # bound, not loaded
        assert isinstance(user.heavy, deferred.DeferredModule)
        assert user.json is sys.modules["json"]  # already loaded: the module itself
        assert user.use() == 42  # first use loads it ...
        assert user.heavy is sys.modules["deferred_pkg.heavy"]  # ... and it replaces its stand-ins
        assert user.also_heavy is user.heavy
        assert builtins.__import__ is deferred._original_import  # the hook is gone after the block
    finally:
        for name in ("deferred_pkg.user", "deferred_pkg.heavy", "deferred_pkg"):
            sys.modules.pop(name, None)


def test_a_deferred_import_of_a_module_not_warmed_up_is_refused():
    with pytest.raises(ImportError, match="not named in deferred.WARM_UP"), deferred.imports():
        from margin.core import not_a_warmed_up_module  # noqa: F401
    with pytest.raises(ImportError, match="from urllib import request"), deferred.imports():
        import urllib.request  # noqa: F401
    assert builtins.__import__ is deferred._original_import
