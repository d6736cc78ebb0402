"""`margin agent "task"` as a person runs it in a terminal (a real pseudo-terminal): each step
shown as it happens, an edit's diff asked at the prompt and written only once answered yes, only
over the text the model read; without a terminal, or with `--yes`, no edit is ever made."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

from tests.fakes.fake_openai import reply
from tests.unit.test_cli import cli_env, margin

CALC = "def add(a, b):\n    return a - b\n"


def action(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


def folder(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def env(fake, tmp_path) -> dict[str, str]:
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
            "MARGIN_RETRIEVAL": "false", "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base"}


def in_terminal(args: list[str], answers: str, environ: dict[str, str], cwd) -> tuple[int, str, str]:
    """Run `margin` with a pseudo-terminal as its standard input, `answers` typed into it."""
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "margin.cli", *args], stdin=terminal, capture_output=True,
                              text=True, env=cli_env(**environ), cwd=cwd, timeout=60,
                              preexec_fn=lambda: os.write(controller, answers.encode()) and None)
    finally:
        os.close(terminal)
        os.close(controller)
    return done.returncode, done.stdout, done.stderr


def test_an_edit_is_shown_asked_and_written_once_the_person_says_yes(fake, tmp_path):
    root = folder(tmp_path)
    fake.script(reply(action("read", path="calc.py")), reply(action("edit", path="calc.py", old="a - b", new="a + b")),
                reply(action("finish", answer="add adds now.")))
    code, out, err = in_terminal(["agent", "fix add"], "y\n", env(fake, tmp_path), root)
    assert code == 0, err
    assert (root / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "The agent asks to edit calc.py:\n--- a/calc.py\n+++ b/calc.py" in err and "+    return a + b" in err
    assert "step 1 · read calc.py → done" in err and "step 2 · edit calc.py → done" in err
    assert "add adds now." in out and "finished after 3 steps · edits: calc.py:2-2" in err
    assert "Allow? [y]es / [a]lways in this thread / [n]o: " in err and "Allow?" not in out


def test_no_is_no_and_without_a_terminal_or_with_yes_nothing_is_written(fake, tmp_path):
    root = folder(tmp_path)
    script = (reply(action("read", path="calc.py")), reply(action("edit", path="calc.py", old="a - b", new="a + b")),
              reply(action("finish", answer="left as it was")))
    fake.script(*script)
    code, _, err = in_terminal(["agent", "fix add"], "n\n", env(fake, tmp_path), root)
    assert code == 0 and "step 2 · edit calc.py → refused" in err
    fake.script(*script)
    piped = margin("agent", "fix add", env=env(fake, tmp_path), cwd=root)
    assert piped.returncode == 0 and "no terminal to ask at" in piped.stderr
    fake.script(*script)
    read_only = margin("agent", "--yes", "fix add", env=env(fake, tmp_path), cwd=root)
    assert read_only.returncode == 0 and "edit calc.py → refused" in read_only.stderr
    assert "not allowed in this run" in json.dumps(fake.requests[-1]["messages"])
    assert (root / "calc.py").read_text() == CALC
