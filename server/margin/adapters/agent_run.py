"""The agent's `run` tool: a command the person confirmed, run in the workspace folder in Margin's
sandbox (adapters/sandbox.py) — no network, none of the person's files but the workspace's, no
secrets in its environment, everything it starts ended with it, a time limit.

Only a plain command runs: one program and its arguments, no shell (core/agent/approvals.py
`plain_command`: `;`, `&&`, `|`, `$(…)`, redirections are refused, so what was confirmed is all
that runs). The program is found in the workspace's own `.venv/bin`, else on the system's PATH
(`/usr/local/bin:/usr/bin:/bin`), never on the person's PATH. A virtual environment's Python is
a link to an installation elsewhere (its `pyvenv.cfg` says where): that installation is made
readable in the sandbox too. The model is shown the exit status and the output's start and end."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

from margin.adapters import sandbox
from margin.core.agent.approvals import plain_command
from margin.core.agent.edits import fingerprint
from margin.core.agent.ports import Ran

TIME_LIMIT_S = 300.0
OUTPUT_HEAD = 2_000
OUTPUT_TAIL = 8_000
"""characters of the output shown: its start and its end (a test run's summary is at its end)"""


def program_path(word: str, folder: Path) -> Path | None:
    """The program `word` names: a path inside the folder (`./run.sh`, `.venv/bin/python`), else
    the workspace's `.venv/bin`, else the system's PATH. `python` where there is none (Debian
    and Ubuntu ship only `python3`) is `python3`, the word every model and README uses."""
    if "/" in word:
        found = (folder / word).resolve()
        inside = found == folder.resolve() or folder.resolve() in found.parents
        return found if inside and found.is_file() and os.access(found, os.X_OK) else None
    for name in (word, "python3") if word == "python" else (word,):
        venv = folder / ".venv" / "bin" / name
        if venv.is_file() and os.access(venv, os.X_OK):
            return venv
        system = shutil.which(name, path=sandbox.SYSTEM_PATH)
        if system:
            return Path(system)
    return None


def readable_for(program: Path, folder: Path) -> list[Path]:
    """What the sandbox must let `program` read beyond /usr and the folder: the installation a
    virtual environment's Python links to (its `pyvenv.cfg` `home`), and where a link leads."""
    reads: set[Path] = set()
    real = Path(os.path.realpath(program))
    if not str(real).startswith(("/usr/", str(folder.resolve()) + "/")):
        reads.add(real.parent.parent if real.parent.name == "bin" else real.parent)
    for config in (program.parent.parent / "pyvenv.cfg",):
        try:
            lines = config.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                home = Path(os.path.realpath(value.strip()))
                if not str(home).startswith("/usr/"):
                    reads.add(home.parent if home.name == "bin" else home)
    return sorted(reads)


async def run_command(command: str, folder: Path, time_limit_s: float = TIME_LIMIT_S) -> Ran:
    """Run `command` (already confirmed) in `folder` under the sandbox."""
    words = plain_command(command)
    if words is None:
        return Ran("Only a plain command runs: one program and its arguments, with no ;, &&, |, $(…), "
                   "backquotes or redirections. Run one command at a time.", ok=False)
    program = program_path(words[0], folder)
    if program is None:
        return Ran(f"There is no program {words[0]!r} in the workspace's .venv/bin or on the system's PATH.",
                   ok=False)
    try:
        chosen = sandbox.protection()
    except sandbox.SandboxError as error:
        return Ran(f"Nothing ran: {error}", ok=False)
    if not chosen.strong and os.environ.get("MARGIN_SANDBOX", "").strip().lower() != "launcher":
        return Ran(f"Nothing ran: commands run only in the bubblewrap sandbox, and here {chosen.why}. "
                   "(MARGIN_SANDBOX=launcher in your environment runs them under the weaker launcher.)", ok=False)
    path = f"{folder / '.venv' / 'bin'}:{sandbox.SYSTEM_PATH}"
    env = {"PATH": path, "HOME": str(folder), "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryFile() as output:
        finished = await sandbox.run([str(program), *words[1:]], folder, time_limit_s=time_limit_s, stdout=output,
                                     stderr=output, env=env, reads=readable_for(program, folder), give_folder=False)
        size = output.seek(0, os.SEEK_END)
        output.seek(0)
        if size <= (OUTPUT_HEAD + OUTPUT_TAIL) * 4:
            whole = output.read().decode("utf-8", errors="replace")
            head, tail = (whole, "") if len(whole) <= OUTPUT_HEAD + OUTPUT_TAIL else (whole[:OUTPUT_HEAD], whole[-OUTPUT_TAIL:])
        else:
            head = output.read(OUTPUT_HEAD * 4).decode("utf-8", errors="replace")[:OUTPUT_HEAD]
            output.seek(size - OUTPUT_TAIL * 4)
            tail = output.read().decode("utf-8", errors="replace")[-OUTPUT_TAIL:]
    body = head + (f"\n… ({size:,} bytes in all; its end:)\n{tail}" if tail else "")
    if body and not body.endswith("\n"):
        body += "\n"
    status = (f"stopped after {time_limit_s:g} s" if finished.timed_out else
              f"killed by signal {-finished.returncode}" if finished.returncode < 0 else f"exit status {finished.returncode}")
    return Ran(f"$ {command}\n{body}[{status}]\n", ok=not finished.timed_out and finished.returncode == 0,
               returncode=finished.returncode, protection=chosen.name)


def _write_now(path: Path, base: str | None, text: str) -> str | None:
    try:
        current = path.read_bytes().decode("utf-8", errors="surrogateescape")
    except FileNotFoundError:
        current = None
    except OSError as error:
        return f"{path.name} cannot be read ({error.strerror})."
    if (current is None) != (base is None) or (current is not None and base is not None
                                                and fingerprint(current) != fingerprint(base)):
        return f"{path.name} changed on disk since it was read: nothing was written."
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", delete=False) as made:
        made.write(text.encode("utf-8", errors="surrogateescape"))
    try:
        if current is not None:
            os.chmod(made.name, path.stat().st_mode & 0o7777)
        os.replace(made.name, path)
    except OSError as error:
        Path(made.name).unlink(missing_ok=True)
        return f"{path.name} could not be written ({error.strerror})."
    return None


class LocalHands:
    """The agent's hands on this machine: commands in the sandbox, files written whole and at
    once (a temporary file renamed over it), only over the text the model read."""

    async def run(self, command: str, folder: Path) -> Ran:
        return await run_command(command, folder)

    async def write(self, path: Path, base: str | None, text: str) -> str | None:
        return await asyncio.to_thread(_write_now, path, base, text)
