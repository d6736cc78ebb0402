"""What one chat, edit-ops or agent turn is made of, apart from the services that run it: what
the user asks (`Ask`), the prompt prepared for it (`Prepared`), and the rule of one request per
thread at a time (`ThreadGuard`). The context gatherers (gather.py) and summaries read these, so
they need not know the chat service."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from margin.core.assemble import ChatAssembly, FileRef
from margin.core.budget import BudgetReport
from margin.core.threads import Message, Thread
from margin.core.where import NOWHERE, Where
from margin.services.errors import Busy
from margin.services.profile import Profile


@dataclass(frozen=True)
class Ask:
    """What the user asks (`message`), where (`where`), and which open files the prompt may
    include (None: every open file)."""

    message: str
    where: Where = NOWHERE
    files: Sequence[str] | None = None


@dataclass
class Prepared:
    profile: Profile
    thread: Thread
    assembly: ChatAssembly
    newest: str
    display: str
    counted: int = 0
    """the final prompt counted whole by the tokenizer (0 when nothing is sent)"""
    files: Sequence[FileRef] = ()
    """the files the prompt could include (snapshots, at the moment it was assembled)"""
    history: Sequence[Message] = ()
    """the thread as it was when the prompt was assembled"""
    ask: Ask | None = None

    def seen_files(self) -> list[FileRef]:
        """The files whose content is in the prompt: retained or sent anew."""
        shown = set(self.assembly.retained) | set(self.assembly.resent)
        return [ref for ref in self.files if ref.file.uri in shown]

    def budget(self) -> BudgetReport:
        """The budget report, with `counted`: the exact count of the prompt as sent."""
        return self.assembly.plan.report(self.counted)


class ThreadGuard:
    """One chat or edit-ops request per thread at a time."""

    def __init__(self) -> None:
        self._busy: set[str] = set()

    def acquire(self, thread_id: str) -> None:
        if thread_id in self._busy:
            raise Busy("Margin is still answering the previous message in this thread. Wait for "
                       "it, or cancel it, then send again.")
        self._busy.add(thread_id)

    def release(self, thread_id: str) -> None:
        self._busy.discard(thread_id)
