"""When an agent's turn is stuck, and how far a turn may go: the rules that keep a loop from
running to its step cap doing the same thing, or from running at all past what the model's size
can carry.

- The same call (tool and arguments) answered with the same result a second time: the model is
  told it already did that, with the pointer to the first answer, and the call is not run again
  where it need not be. A third time: the turn stops, saying so.
- No file changed and no new result for STALL_STEPS steps in a row: the turn stops.
- A step cap by the model's size (`step_cap`): small models lose the thread sooner.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Literal

from margin.core.agent.tools import canonical

STALL_STEPS = 4
"""steps in a row with nothing new (no file changed, every result one seen before) before a turn stops"""
SMALL_MODEL_B = 3.0
"""models of at most this many billion parameters get SMALL_STEPS"""
SMALL_STEPS = 8
STEPS = 20

Verdict = Literal["go on", "repeated", "stop"]


@dataclass(frozen=True)
class Seen:
    verdict: Verdict
    """go on; repeated (tell the model, with `first`); stop (the turn ends, `why`)"""
    first: str = ""
    """the pointer to the first time this call was answered, when repeated"""
    why: str = ""


@dataclass
class Watch:
    """What one turn has done so far."""

    answers: dict[tuple[str, str, str], tuple[str, int]] = field(default_factory=dict)
    """(tool, arguments, result's digest) → (the pointer to its first answer, times seen)"""
    quiet_steps: int = 0
    """steps in a row with nothing new"""

    def after(self, tool: str, args: dict[str, object], result: str, pointer: str) -> Seen:
        """Record a call and its result (`pointer`: where its answer is kept)."""
        key = (tool, canonical(args), hashlib.blake2b(result.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest())
        first, times = self.answers.get(key, (pointer, 0))
        self.answers[key] = (first, times + 1)
        if times + 1 >= 3:
            return Seen("stop", first, f"the same {tool} call gave the same result three times")
        if times + 1 == 2:
            return Seen("repeated", first)
        return Seen("go on")

    def step_done(self, *, something_new: bool) -> Seen:
        """At a step's end: `something_new` when a file changed or a result was new."""
        self.quiet_steps = 0 if something_new else self.quiet_steps + 1
        if self.quiet_steps >= STALL_STEPS:
            return Seen("stop", why=f"{STALL_STEPS} steps in a row changed nothing and found nothing new")
        return Seen("go on")


def repeated_note(tool: str, first: str) -> str:
    """What the model is told when it repeats a call that gave the same result."""
    return f"You already called {tool} with these arguments, and the result was the same: {first}. Do something else."


_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", re.IGNORECASE)


def parameters_b(model: str | None) -> float | None:
    """The model's size in billions of parameters, as its name says it (`gemma-3-270m` 0.27,
    `Qwen2.5-Coder-1.5B` 1.5, `llama3.1:8b` 8), or None."""
    if not model:
        return None
    sizes = [float(number) / (1000 if unit.lower() == "m" else 1) for number, unit in _SIZE.findall(model)]
    sizes = [size for size in sizes if size > 0]
    return max(sizes) if sizes else None


def is_small(model: str | None) -> bool:
    """Whether `model` is a small one (SMALL_MODEL_B or less, by its name)."""
    size = parameters_b(model)
    return size is not None and size <= SMALL_MODEL_B


def step_cap(model: str | None) -> int:
    """Steps a turn may take with `model`: SMALL_STEPS for a small one, STEPS otherwise (and when
    its size is not known)."""
    return SMALL_STEPS if is_small(model) else STEPS
