"""What the agent does outside Margin, as ports the composition root (margin.wiring) fills:
running a confirmed command in the sandbox, and writing a file only over the text it replaces."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Ran:
    text: str
    """for the model"""
    ok: bool
    returncode: int | None = None
    protection: str = ""


class Hands(Protocol):
    async def run(self, command: str, folder: Path) -> Ran:
        """Run a confirmed command in `folder`, sandboxed (adapters.agent_run)."""

    async def write(self, path: Path, base: str | None, text: str) -> str | None:
        """Write `text` to `path` if the file holds exactly `base` (None: it does not exist);
        None when written, else why not."""
