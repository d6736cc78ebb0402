"""`margin next-edit FILE LINE[:COL]`: the next edit for the cursor there, from the edits made to
FILE — its working-tree changes against git's HEAD, or `--diff PATCH` (a unified diff whose new
side is FILE as it is) — each hunk one edit, in file order. Prints the suggested edit as a
unified diff of FILE (nothing is written), or why there is none."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
from pathlib import Path

from margin.adapters.git_cli import head_text
from margin.cli_app import CliError, open_services, running_app
from margin.core.next_edit.decide import apply
from margin.core.next_edit.history import DocumentHistory

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser("next-edit", help="the next edit at a cursor, from the edits made to FILE",
                                  description=(__doc__ or "").split("\n\n")[0])
    command.add_argument("file", metavar="FILE")
    command.add_argument("position", metavar="LINE[:COL]", help="the cursor, counted from 1")
    command.add_argument("--diff", type=Path, metavar="PATCH",
                         help="the edits as a unified diff (default: FILE's changes against git's HEAD)")
    command.set_defaults(run=_next_edit)


def hunks(diff: str) -> list[tuple[int, int, list[str], list[str]]]:
    """(first line of the new side, from 0; its line count; old lines; new lines) of each hunk."""
    found: list[tuple[int, int, list[str], list[str]]] = []
    for line in diff.split("\n"):
        header = _HUNK.match(line)
        if header:
            start, count = int(header.group(3)), int(header.group(4) or 1)
            found.append((start - 1 if count else start, count, [], []))
        elif found and line[:1] in (" ", "-", "+"):
            old, new = found[-1][2], found[-1][3]
            if line[0] in " -":
                old.append(line[1:])
            if line[0] in " +":
                new.append(line[1:])
    return found


def history_from(text: str, diff: str) -> DocumentHistory:
    """The history whose edits are the diff's hunks, in file order, ending at `text`."""
    changes = hunks(diff)
    if not changes:
        raise CliError("no edits to go on: the diff has no hunks (change the file, or give --diff)")
    lines = text.split("\n")
    for start, count, old, new in reversed(changes):
        if lines[start : start + count] != new:
            raise CliError(f"the diff does not end at the file as it is (its hunk at line {start + 1})")
        lines[start : start + count] = old
    history = DocumentHistory("\n".join(lines), 0)
    for n, (start, _count, old, new) in enumerate(changes):
        # in file order: the lines above are as they end, so the hunk's new-side line is where it goes
        lines[start : start + len(old)] = new
        history.changed("\n".join(lines), n + 1, 10.0 * (n + 1))  # a pause between hunks: each its own edit
    if history.text != text:
        raise CliError("the diff does not end at the file as it is")
    return history


def _head_diff(path: Path) -> str:
    """FILE's working-tree changes against HEAD as a unified diff of no context: HEAD's text read
    as stored (git runs no filter or diff driver a repository names) and diffed here. A file
    written with CRLF line ends whose HEAD text has LF is compared as git would (its text
    attribute's conversion)."""
    try:
        old = head_text(path).decode("utf-8")
        now = path.read_bytes().decode("utf-8")
    except (OSError, subprocess.TimeoutExpired, UnicodeDecodeError) as error:
        raise CliError(f"cannot read {path.name} at HEAD: {error} (give the edits with --diff)") from None
    except RuntimeError as error:
        raise CliError(f"git has no {path.name} at HEAD: {error} (give the edits with --diff)") from None
    if "\r\n" in now and "\r\n" not in old:
        old = old.replace("\n", "\r\n")
    return "\n".join(difflib.unified_diff(old.split("\n"), now.split("\n"), n=0, lineterm=""))


async def _next_edit(args: argparse.Namespace) -> int:
    from margin.core.next_edit.history import EditHistories
    from margin.services.next_edit import NextEditService

    line = args.position.split(":", 1)[0]
    if not line.isdigit() or int(line) < 1:
        raise CliError(f"LINE[:COL] counts from 1, got {args.position!r}")
    path = Path(args.file)
    try:
        diff = args.diff.read_text(encoding="utf-8") if args.diff else _head_diff(path.resolve())
    except OSError as error:
        raise CliError(f"cannot read {args.diff}: {error}") from None
    async with running_app(args) as (app, _):
        _services, (uri,) = open_services(app, [args.file])
        file = app.files.get(uri)
        assert file is not None
        history = history_from(file.text, diff)
        outcome = await NextEditService(app, EditHistories()).suggest(uri, int(line) - 1, history=history)
    if not outcome.enabled or not outcome.edits:
        print(f"margin: no suggestion: {outcome.silence}", file=sys.stderr)
        return 0 if outcome.enabled else 1
    after = apply(file.text, outcome.edits)
    name = os.path.relpath(path.resolve())
    sys.stdout.writelines(difflib.unified_diff(file.text.splitlines(keepends=True), after.splitlines(keepends=True),
                                               fromfile=f"a/{name}", tofile=f"b/{name}"))
    first = file.text.count("\n", 0, outcome.edits[0].start) + 1
    print(f"margin: next edit at line {first} ({outcome.route} route)", file=sys.stderr)
    return 0
