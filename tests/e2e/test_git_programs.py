"""Every git command Margin runs (adapters/git_cli.py: `rev-parse` and `log` for retrieval's
history, `cat-file blob` for `margin next-edit`) against a repository whose own `.git/config` and
`.gitattributes` name a program in every setting that can make git run one: nothing runs, and the
commands still do their work. A repository shared as an archive or a folder brings these files."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from margin.adapters.git_cli import GitCommandHistory, head_text
from tests.e2e.test_next_edit_cli import AFTER, BEFORE, NEXT, env, repository, window_of
from tests.fakes.fake_openai import reply
from tests.unit.test_cli import margin

SETTINGS = ["core.fsmonitor", "core.pager", "core.editor", "core.sshCommand", "core.askPass", "core.gitProxy",
            "core.alternateRefsCommand", "diff.external", "diff.evil.command", "diff.evil.textconv",
            "filter.evil.clean", "filter.evil.smudge", "filter.evil.process", "gpg.program", "gpg.ssh.program",
            "gpg.x509.program", "credential.helper", "sequence.editor", "pager.log", "pager.diff", "pager.cat-file",
            "uploadpack.packObjectsHook", "merge.evil.driver"]
"""every setting a repository's config may name a program in, that a command reading history or
a file could reach"""


def booby_trap(folder: Path, tmp_path: Path) -> Path:
    """`folder`'s config names a recording program in every setting above, with the switches
    that make git use them; returns the file the program writes to when it runs."""
    ran = tmp_path / "ran"
    program = tmp_path / "program.sh"
    program.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {ran}\nexit 1\n")
    program.chmod(0o755)
    for key in SETTINGS:
        subprocess.run(["git", "config", key, str(program)], cwd=folder, check=True)
    for key, value in (("log.showSignature", "true"), ("filter.evil.required", "true"), ("core.hooksPath",
                                                                                         str(tmp_path / "hooks"))):
        subprocess.run(["git", "config", key, value], cwd=folder, check=True)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("post-checkout", "post-index-change", "reference-transaction", "fsmonitor-watchman"):
        (hooks / hook).write_text(program.read_text())
        (hooks / hook).chmod(0o755)
    (folder / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n")
    return ran


def test_the_trap_works_on_this_git(tmp_path):
    """The same repository makes plain git run the program: the tests below would prove nothing
    otherwise."""
    folder = repository(tmp_path)
    ran = booby_trap(folder, tmp_path)
    for command in (["diff", "HEAD"], ["status"], ["log", "-1"]):
        subprocess.run(["git", *command], cwd=folder, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    assert ran.exists()


def test_margin_next_edit_reads_head_and_runs_nothing(fake, tmp_path):
    folder = repository(tmp_path)
    ran = booby_trap(folder, tmp_path)
    fake.script(reply(f"```python\n{window_of(NEXT)}\n```"))
    done = margin("next-edit", "geometry.py", "4:18", env=env(fake, tmp_path), cwd=folder)
    assert done.returncode == 0, done.stderr
    assert "-    return math.pi * r * r\n+    return math.pi * radius * radius\n" in done.stdout
    assert not ran.exists(), ran.read_text()
    assert head_text(folder / "geometry.py") == BEFORE.encode() and (folder / "geometry.py").read_text() == AFTER
    assert not ran.exists(), ran.read_text()


def test_retrievals_history_reads_and_runs_nothing(tmp_path):
    folder = repository(tmp_path)
    subprocess.run(["git", "commit", "-qam", "Rename the radius"], cwd=folder, check=True)
    ran = booby_trap(folder, tmp_path)
    (folder / "sub").mkdir()
    commits = asyncio.run(GitCommandHistory(folder).commits())
    in_sub = asyncio.run(GitCommandHistory(folder / "sub").commits())
    assert [c.subject for c in commits or []] == ["Rename the radius", "first"]
    assert in_sub is not None
    assert not ran.exists(), ran.read_text()
