"""Margin as a user installs it: the sdist and the wheel are built from this tree (`uv build`, the
wheel from the sdist), the wheel is installed with `uv tool install` into a tool folder of its
own, and the installed `margin-lsp` and `margin` commands — not this repository's .venv — answer
`--version`, `initialize` (with the version in serverInfo), a chat against the fake backend, and
`margin doctor`. A file the wheel or the sdist leaves out (the prompts, the shared tokens) fails
here. The dependencies come from the package index (PyPI) through uv's cache; no Python is
downloaded (the tool runs on the interpreter running the tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from margin import __version__
from tests import log_secrets
from tests.conftest import clean_env
from tests.e2e.raw_lsp import raw_client
from tests.fakes.fake_openai import reply


@dataclass(frozen=True)
class Installed:
    sdist: Path
    wheel: Path
    bin: Path
    """the folder holding the installed `margin` and `margin-lsp`"""
    python: Path
    """the interpreter of the tool's own environment"""
    home: Path
    """a folder outside the repository to run the commands in"""

    def command(self, name: str) -> str:
        return str(self.bin / name)


def uv_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(UV_TOOL_DIR=str(root / "tools"), UV_TOOL_BIN_DIR=str(root / "bin"),
               UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1")
    return env


def run_or_fail(what: str, argv: list[str], *, env: dict[str, str], cwd: Path) -> None:
    # The limit only stops a hung command: a build and install take seconds with uv's cache warm.
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=900)
    if result.returncode != 0:
        pytest.fail(f"{what} failed ({result.returncode}): {' '.join(argv)}\n{result.stdout}\n{result.stderr}",
                    pytrace=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    from uv import find_uv_bin

    uv = find_uv_bin()
    root = tmp_path_factory.mktemp("installed")
    home = root / "home"
    home.mkdir()
    repo = Path(__file__).resolve().parents[2]
    env = uv_env(root)
    run_or_fail("uv build", [uv, "build", "--out-dir", str(root / "dist"), str(repo)], env=env, cwd=home)
    sdists = list((root / "dist").glob("margin_lsp-*.tar.gz"))
    wheels = list((root / "dist").glob("margin_lsp-*.whl"))
    assert [p.name for p in sdists] == [f"margin_lsp-{__version__}.tar.gz"]
    # The wheel carries the C tokeniser (hatch_build.py), so it is tagged for this interpreter.
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert [p.name.split("-")[:4] for p in wheels] == [["margin_lsp", __version__, tag, tag]], wheels
    run_or_fail("uv tool install", [uv, "tool", "install", "--python", sys.executable, str(wheels[0])],
                env=env, cwd=home)
    python = root / "tools" / "margin-lsp" / "bin" / "python"
    return Installed(sdist=sdists[0], wheel=wheels[0], bin=root / "bin", python=python, home=home)


def run_installed(installed: Installed, name: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    log_secrets.secret(args)
    return subprocess.run([installed.command(name), *args], capture_output=True, text=True, cwd=installed.home,
                          env=clean_env(XDG_CONFIG_HOME="/nonexistent", MARGIN_LOG_FILE=log_secrets.new_log_file(),
                                        **env), timeout=60)


def test_the_commands_run_from_the_tool_environment_not_the_repository(installed):
    where = subprocess.run(
        [str(installed.python), "-c",
         "import importlib.metadata, margin; print(margin.__file__); print(importlib.metadata.version('margin-lsp')); "
         + "from margin.core.retrieval import filedata; print(filedata.fast_tokeniser())"],
        capture_output=True, text=True, cwd=installed.home, env=clean_env(), timeout=60)
    assert where.returncode == 0, where.stderr
    module, version, fast = where.stdout.split()
    assert fast == "True", "the installed wheel has no C tokeniser"
    assert Path(module).is_relative_to(installed.python.parents[1]), module
    assert version == __version__
    for name in ("margin", "margin-lsp"):  # the console scripts start the tool's interpreter
        assert (installed.bin / name).exists()
        first_line = (installed.bin / name).resolve().read_text().splitlines()[0]
        assert first_line == f"#!{installed.python}", first_line


def test_both_commands_print_the_version(installed):
    for name in ("margin", "margin-lsp"):
        result = run_installed(installed, name, "--version")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"{name} {__version__}"


async def test_margin_lsp_initializes_chats_and_exits(installed, fake, tmp_path):
    fake.script(reply("Answered by the installed wheel.", chunk_size=7))
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
           "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", "MARGIN_COMPLETION_ENABLED": "0"}
    async with raw_client(env, capabilities={}, root_uri=(tmp_path / "ws").as_uri(),
                          program=installed.command("margin-lsp"), command=()) as client:
        assert client.init_result["serverInfo"] == {"name": "margin", "version": __version__}
        result = await client.request("margin/chat", {"message": "are you installed?"})
        assert result["reply"] == "Answered by the installed wheel."
        assert len(fake.requests) == 1
        # The system prompt is the shipped template's (prompts/chat_ops_v1.md, from the wheel).
        system = fake.requests[0]["messages"][0]
        assert system["role"] == "system"
        assert "You are Margin, a programming assistant" in system["content"]
    # raw_client sent shutdown and exit and waited for the process to end
    assert client.process.returncode == 0


def test_margin_doctor_reports_the_fake_backend_reachable(installed, fake):
    fake.tokenize = lambda body: {"tokens": list(range(len(body["content"].split())))}  # llama.cpp's /tokenize
    result = run_installed(installed, "margin", "doctor", MARGIN_DEFAULTS_BASE_URL=fake.base_url,
                           MARGIN_COMPLETION_ENABLED="0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"Margin {__version__} doctor\n")
    assert "  reachable       yes" in result.stdout
    assert "All 4 enabled profiles are ready." in result.stdout
