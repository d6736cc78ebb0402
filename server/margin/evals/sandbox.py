"""Model-written code checked: a program run in Margin's sandbox (margin.adapters.sandbox:
bubblewrap where the machine has it, else a launcher that keeps less; `protection()` says which,
and `margin eval` prints it), with a time limit, and judged passed only when its checks ran to
the end.

Each program runs in a fresh interpreter (`python -I`: no user site, no PYTHON* variables, the
script's folder not on sys.path), in an empty temporary folder that is its working directory and
is removed after, with an environment of PATH alone and with limits on memory, CPU seconds, file
size and open files (set by the harness before the code runs). Standard input is closed; its
output goes to files held to the size limit. Every process it starts has ended when check()
returns.

A program "passes" when the harness prints a token it alone knows after the checks returned: a
completion that calls `exit(0)`, `os._exit(0)` or raises SystemExit before the checks finish
fails, as one that loops or sleeps past the limit does. The token is read from the harness's
first line and kept out of the namespace the checked code runs in. This guards against code
that ends early by mistake; what keeps code written to escape from the user's secrets, files,
network and machine is the sandbox.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from margin.adapters import sandbox as sandboxed

TIME_LIMIT_S = 10.0
"""a HumanEval check takes well under a second; a loop is stopped at this"""
MEMORY_BYTES = 1 << 30
FILE_BYTES = 16 << 20
OUTPUT_KEPT = 2000
"""characters of the program's standard error kept for the report"""

_HARNESS = """\
import sys
def _run(token, limits):
    try:
        import resource
        for name, value in limits:
            resource.setrlimit(getattr(resource, name), (value, value))
    except (ImportError, ValueError, OSError):
        pass
    namespace = {"__name__": "__checked__", "__builtins__": __builtins__}
    with open(sys.argv[1], encoding="utf-8") as source:
        code = compile(source.read(), "checked.py", "exec")
    exec(code, namespace)
    sys.stdout.flush()
    sys.__stdout__.write("\\n" + token + "\\n")
    sys.__stdout__.flush()
_run(sys.argv.pop(), %r)
"""
"""the harness: it sets the limits, then runs the checked code; the token comes as its last
argument (gone from sys.argv before the checked code runs) and is printed after it returns"""


def _harness(time_limit_s: float) -> str:
    limits = [("RLIMIT_AS", MEMORY_BYTES), ("RLIMIT_CPU", int(time_limit_s) + 1), ("RLIMIT_FSIZE", FILE_BYTES),
              ("RLIMIT_NOFILE", 64), ("RLIMIT_CORE", 0)]
    return _HARNESS % (limits,)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    outcome: str
    """passed, failed (an exception or a failed assertion), exited (ended before its checks
    did), timed out, or crashed (killed by a signal: memory or CPU limits)"""
    detail: str = ""
    """the last line of its standard error, or why it was stopped"""
    output: str = ""
    """the end of its standard error (about OUTPUT_KEPT characters): a failed test's report"""


async def check(program: str, time_limit_s: float = TIME_LIMIT_S, files: Mapping[str, str] | None = None) -> Verdict:
    """Run `program` (the prompt, the completion, the suffix and the tests, ending in the call
    of the checks) as described above, with `files` (name → text: modules it imports) in its
    folder. Its output goes to files in its folder, held to the file-size limit, and only their
    ends are read: a program that prints without end cannot fill Margin's memory."""
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="margin-eval-") as folder:
        where = Path(folder)
        for name, text in (files or {}).items():
            if Path(name).name != name or name in ("checked.py", "harness.py", "out", "err"):
                raise ValueError(f"a file of the checked program is a plain name of its own, not {name!r}")
            (where / name).write_text(text, encoding="utf-8")
        (where / "checked.py").write_text(program, encoding="utf-8")
        (where / "harness.py").write_text(_harness(time_limit_s), encoding="utf-8")
        out, err = _outputs(where)
        with out, err:
            finished = await sandboxed.run(
                sandboxed.python_argv(str(where / "harness.py"), str(where / "checked.py"), token), where,
                time_limit_s=time_limit_s, stdout=out, stderr=err)
        if finished.timed_out:
            return Verdict(False, "timed out", f"stopped after {time_limit_s:g} s")
        printed, errors = _tail(where / "out"), _tail(where / "err")[-OUTPUT_KEPT:]
    last, returncode = _last_line(errors), finished.returncode
    if returncode < 0:
        return Verdict(False, "crashed", f"killed by signal {-returncode}", errors)
    if printed.rstrip("\n").endswith("\n" + token) and returncode == 0:
        return Verdict(True, "passed", output=errors)
    if returncode == 0 or "SystemExit" in last or not last:
        return Verdict(False, "exited", last or f"exit status {returncode} before its checks ended", errors)
    return Verdict(False, "failed", last, errors)


def _outputs(where: Path) -> tuple[BinaryIO, BinaryIO]:
    """The files the program's standard output and error go to."""
    return open(where / "out", "wb"), open(where / "err", "wb")  # the caller closes them


def _tail(path: Path) -> str:
    """The last OUTPUT_KEPT characters (about) of a file the program wrote."""
    with open(path, "rb") as written:
        written.seek(0, os.SEEK_END)
        written.seek(max(0, written.tell() - 4 * OUTPUT_KEPT))
        return written.read().decode("utf-8", "replace")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:OUTPUT_KEPT] if lines else ""
