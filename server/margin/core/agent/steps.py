"""An agent thread as the model is shown it at each step, within the budget (pure).

A thread holds tasks and steps. A step is the model's answer (its action) and the results of the
calls it made — or what it was told instead (a rejected call, a repeat). Every result has a
pointer, `[t12 read parser.py]` (t12: the step), and the prompt shows the newest HOT_STEPS steps'
results whole and older ones as their pointers, which the `recall` tool answers from the thread
(seed 003: old tool output as compact pointers the model can recall). When even that does not
fit, newer results become pointers too, newest last, then the oldest steps are left out whole,
with a line saying how many: never a cut inside a message, never a request over the window.

How a step is written depends on the model's action protocol (core.agent.actions): with native
tool calls, an assistant message with `tool_calls` and a `tool` message answering each; else the
action as the assistant's text and its results in a user message."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from margin.core.agent.actions import Protocol
from margin.core.llm import ChatMessage, ToolCall
from margin.core.pointers import pointer

HOT_STEPS = 2
"""the newest steps whose results are shown whole (when they fit)"""
AGENT = "agent"
"""the metadata key of an agent thread's messages"""
RESULT = "agent_result"
"""the kind of a stored result"""
LEGEND = ("Text like [t3 read a.py] stands for the result of an earlier step that is no longer shown "
          "(t3: the step). To see it again, call recall with it.")


@dataclass(frozen=True)
class Result:
    """What the model was shown for one call (or instead of one)."""

    step: int
    text: str
    label: str
    """what the pointer names: `read parser.py`, `run pytest -q`, `told`"""
    call_id: str | None = None
    """the native call it answers; None: told as text"""
    tokens: int = 0

    @property
    def pointer(self) -> str:
        return pointer(self.step, self.label)


@dataclass(frozen=True)
class Step:
    number: int
    answer: str
    """the model's answer as the next prompts show it: its text, or its action written as JSON"""
    calls: tuple[ToolCall, ...] = ()
    """the native calls it made (answered by `tool` messages)"""
    results: tuple[Result, ...] = ()


@dataclass(frozen=True)
class Task:
    text: str
    final: str | None = None
    """the answer the task ended with, when it did"""


Entry = Task | Step


@dataclass
class Shape:
    """How the prompt is being fitted: results shown as pointers, steps left out."""

    pointed: set[tuple[int, int]] = field(default_factory=set)
    """(step, result index) shown as pointers"""
    left_out: int = 0
    """oldest steps left out whole"""


def label_for(tool: str, args: Mapping[str, Any]) -> str:
    """A result's name in its pointer: the tool and its main argument, short and on one line."""
    main = next((str(args[key]) for key in ("path", "command", "query", "pointer") if key in args), "")
    main = " ".join(main.split()).replace("]", ")")
    return f"{tool} {main[:48]}".strip() if main else tool


def action_text(tool: str, args: Mapping[str, Any]) -> str:
    """An action as a JSON answer writes it (the json and text protocols' assistant message)."""
    return json.dumps({"tool": tool, "args": dict(args)}, ensure_ascii=False, separators=(", ", ": "))


def first_shape(entries: Sequence[Entry]) -> Shape:
    """Older steps' results as pointers, the newest HOT_STEPS steps' whole."""
    steps = [e for e in entries if isinstance(e, Step)]
    hot = {s.number for s in steps[-HOT_STEPS:]}
    return Shape({(s.number, i) for s in steps if s.number not in hot for i in range(len(s.results))})


def tighter(entries: Sequence[Entry], shape: Shape) -> Shape | None:
    """The next shape that takes less room: the oldest result still whole becomes a pointer;
    when every one is a pointer, the oldest step still shown is left out. None: nothing more can
    go (the tasks and the newest step stay)."""
    steps = [e for e in entries if isinstance(e, Step)]
    for step in steps[shape.left_out:]:
        for i in range(len(step.results)):
            if (step.number, i) not in shape.pointed:
                return Shape({*shape.pointed, (step.number, i)}, shape.left_out)
    if shape.left_out < len(steps) - 1:
        return Shape(set(shape.pointed), shape.left_out + 1)
    return None


def messages(protocol: Protocol, system: str, entries: Sequence[Entry], shape: Shape) -> list[ChatMessage]:
    """The prompt for the next step."""
    steps = [e for e in entries if isinstance(e, Step)]
    gone = {s.number for s in steps[:shape.left_out]}
    out = [ChatMessage("system", system)]
    told_gap = False
    for entry in entries:
        if isinstance(entry, Task):
            out.append(ChatMessage("user", f"Task: {entry.text}"))
            if entry.final is not None:
                out.append(ChatMessage("assistant", entry.final))
            continue
        if entry.number in gone:
            if not told_gap:
                out.append(ChatMessage("user", f"({len(gone)} earlier steps are left out to fit the context window.)"))
                told_gap = True
            continue
        shown = [r.pointer if (entry.number, i) in shape.pointed else r.text for i, r in enumerate(entry.results)]
        if protocol == "native" and entry.calls:
            out.append(ChatMessage("assistant", entry.answer, entry.calls))
            answered = {r.call_id for r in entry.results}
            for result, text in zip(entry.results, shown):
                if result.call_id is not None:
                    out.append(ChatMessage("tool", text, tool_call_id=result.call_id))
            loose = [text for result, text in zip(entry.results, shown) if result.call_id is None]
            loose += [f"Your call {call.name} was not run." for call in entry.calls if call.id not in answered]
            if loose:
                out.append(ChatMessage("user", "\n\n".join(loose)))
        else:
            out.append(ChatMessage("assistant", entry.answer))
            if shown:
                out.append(ChatMessage("user", "\n\n".join(
                    f"Result {r.pointer}:\n{text}" if text != r.pointer else f"Result {text} (not shown)"
                    for r, text in zip(entry.results, shown))))
    return _alternating(out)


def _alternating(out: list[ChatMessage]) -> list[ChatMessage]:
    """Consecutive user or assistant messages joined (several chat templates require turns to
    alternate); tool messages and messages with calls stay as they are."""
    merged: list[ChatMessage] = []
    for message in out:
        last = merged[-1] if merged else None
        if (last is not None and last.role == message.role and message.role in ("user", "assistant")
                and not last.tool_calls and not message.tool_calls):
            merged[-1] = replace(last, content=f"{last.content}\n\n{message.content}")
        else:
            merged.append(message)
    return merged


def shown_pointers(entries: Sequence[Entry], shape: Shape) -> list[str]:
    return [step.results[i].pointer for step in entries if isinstance(step, Step)
            for i in range(len(step.results)) if (step.number, i) in shape.pointed]


def find(entries: Sequence[Entry], wanted: str) -> Result | None:
    """The result a pointer names (`[t3 read a.py]`, `t3 read a.py`, or just `t3` when step 3
    had one result)."""
    text = wanted.strip().strip("[]").strip()
    number, _, label = text.partition(" ")
    if not number.startswith("t") or not number[1:].isdigit():
        return None
    step_number = int(number[1:])
    for entry in entries:
        if isinstance(entry, Step) and entry.number == step_number:
            if not label and len(entry.results) == 1:
                return entry.results[0]
            return next((r for r in entry.results if r.label == label.strip()), None)
    return None


# --- the thread as stored ---------------------------------------------------------------------------


def stored_step(step: Step, meta: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """A step as the thread keeps it: the answer's metadata, and each result's (text, metadata)."""
    answer = {AGENT: {"step": step.number, **meta,
                      "calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in step.calls]}}
    results = [(r.text, {AGENT: {"step": step.number, "label": r.label, "callId": r.call_id, "pointer": r.pointer}})
               for r in step.results]
    return answer, results


@dataclass(frozen=True)
class StoredMessage:
    """What the thread's messages are to this module (core.threads.Message has more)."""

    role: str
    content: str
    kind: str | None
    meta: Mapping[str, Any]
    tokens: int


def entries_of(stored: Sequence[StoredMessage]) -> list[Entry]:
    """The tasks and steps of a stored agent thread, in order."""
    entries: list[Entry] = []
    for message in stored:
        agent = message.meta.get(AGENT)
        if not isinstance(agent, Mapping):
            continue
        if message.role == "user" and agent.get("task"):
            entries.append(Task(message.content))
        elif message.role == "assistant" and agent.get("final"):
            last = next((i for i in range(len(entries) - 1, -1, -1) if isinstance(entries[i], Task)), None)
            if last is not None:
                entries[last] = replace(entries[last], final=message.content)  # type: ignore[arg-type]
        elif message.role == "assistant" and isinstance(agent.get("step"), int):
            calls = tuple(ToolCall(str(c.get("id")), str(c.get("name")), str(c.get("arguments", "")))
                          for c in agent.get("calls", ()) if isinstance(c, Mapping))
            entries.append(Step(agent["step"], message.content, calls))
        elif message.kind == RESULT and isinstance(agent.get("step"), int):
            step = entries[-1] if entries and isinstance(entries[-1], Step) else None
            if step is not None and step.number == agent["step"]:
                call_id = agent.get("callId")
                result = Result(step.number, message.content, str(agent.get("label", "")),
                                str(call_id) if call_id is not None else None, message.tokens)
                entries[-1] = replace(step, results=(*step.results, result))
    # A task that ended without its final answer (cancelled, stopped): moved after its steps,
    # the order is already right; a step whose calls lost their results (cancelled mid-step)
    # keeps only what was stored.
    return entries


def last_step(entries: Sequence[Entry]) -> int:
    return max((e.number for e in entries if isinstance(e, Step)), default=0)


def cut_note(kept: int, total: int) -> str:
    return f"\n… cut to fit the context window: {kept:,} of {total:,} characters shown. Ask for less (a line range).\n"


def cut_to(text: str, tokens: int, limit: int, count: Callable[[str], int] | None = None) -> str:
    """`text` (`tokens` long) cut at a line end to about `limit` tokens, saying so."""
    if tokens <= limit:
        return text
    keep = max(0, int(len(text) * limit / max(tokens, 1) * 0.9) - 120)
    cut = text.rfind("\n", 0, keep)
    kept = text[:cut + 1 if cut > keep // 2 else keep]
    return kept + cut_note(len(kept), len(text))


def first_line(text: str) -> str:
    """A result's first nonblank line, short: what a step's summary shows of it."""
    return next((line.strip()[:160] for line in text.splitlines() if line.strip()), "")
