"""A chat turn that may use the `recall` tool (core.recall_tool): each request streams; when the
model calls `recall`, every call is answered from the stored thread — budgeted, so the next
request still fits the window with the reply's reserve — and the model is asked again. At most
MAX_CALLS calls are answered in a turn; after that, or when no answer fits, the model is asked
once more with `tool_choice: none` and must answer with what it has.

Nothing here is stored: the turn stores the user's message and the reply as ever, with the
recalls it made in the reply's metadata.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from margin.core import pointers, recall_tool
from margin.core.budget import BudgetReport, Dropped, SectionReport
from margin.core.llm import BackendHTTPError, ChatMessage, ContextTooLarge, ToolCall, ToolCalls, Usage
from margin.core.recall_tool import Answer
from margin.core.threads import Message
from margin.core.tokens.counter import TokenCounter
from margin.services.profile import Profile

log = logging.getLogger(__name__)

OnDelta = Callable[[str], Awaitable[None] | None]


class ToolsRefused(Exception):
    """The backend refused a request for offering tools (vLLM without auto tool choice, say)."""


def refuses_tools(error: BackendHTTPError) -> bool:
    """Whether an error says the request's tools were the problem."""
    return not isinstance(error, ContextTooLarge) and error.status in (400, 422, 501) and "tool" in str(error).lower()


@dataclass
class Round:
    text: str
    calls: tuple[ToolCall, ...]
    usage: Usage
    finish: str | None


async def stream_round(profile: Profile, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]],
                       closing: bool, on_delta: OnDelta) -> Round:
    """One streamed request: its text goes to `on_delta` as it comes, its tool calls are joined."""
    request = profile.request(messages, tools=tools, tool_choice="none" if closing else "auto")
    parts: list[str] = []
    calls = ToolCalls()
    usage, finish = Usage(), None
    async for delta in profile.provider.stream(request):
        if delta.text:
            parts.append(delta.text)
            result = on_delta(delta.text)
            if asyncio.iscoroutine(result):
                await result
        if delta.tool_calls:
            calls.add(delta.tool_calls)
        finish = delta.finish_reason or finish
        usage = delta.usage or usage
    return Round("".join(parts), calls.calls(), usage, finish)


@dataclass
class Recalls:
    """The recall answers of one turn, and what they cost."""

    answers: list[Answer] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    """tokens of each answer's text"""

    @property
    def full(self) -> bool:
        return len(self.answers) >= recall_tool.MAX_CALLS

    def made(self) -> list[dict[str, Any]]:
        """For the reply's metadata and the result: pointer, status and tokens of each call."""
        return [{"pointer": a.pointer, "status": a.status, "tokens": tokens,
                 **({"fingerprint": a.fingerprint} if a.fingerprint else {})} for a, tokens in zip(self.answers, self.tokens)]

    def report(self, report: BudgetReport, counted: int) -> BudgetReport:
        """`report` with a `recalls` section (every answer's tokens; what was not recalled, why)
        and the count of the last request sent."""
        if not self.answers:
            return dataclasses.replace(report, counted=counted)
        tokens = sum(self.tokens)
        kept = sum(1 for a in self.answers if a.recalled)
        dropped = tuple(Dropped(a.pointer or a.call.name, a.status) for a in self.answers if not a.recalled)
        return dataclasses.replace(report, sections=(*report.sections, SectionReport("recalls", tokens, kept, dropped)),
                                   total=report.total + tokens, counted=counted)


async def answer_calls(calls: Sequence[ToolCall], text: str, messages: list[ChatMessage], history: Sequence[Message],
                       open_fingerprint: Callable[[str], str | None], counter: TokenCounter, tools: Sequence[dict[str, Any]],
                       limit: int, recalls: Recalls) -> tuple[list[ChatMessage], int] | None:
    """The messages with the model's calls and their answers added, and their exact count; None
    when not even short answers fit (the turn then closes without them). An answer that does not
    fit in what the limit leaves says so instead of carrying the content."""
    answers: list[Answer] = []
    for call in calls:
        if len(recalls.answers) + len(answers) >= recall_tool.MAX_CALLS:
            answers.append(recall_tool.over_the_limit(call))
            continue
        wanted = recall_tool.pointer_of(call)
        found = pointers.resolve(history, wanted) if wanted else None
        if found is None:
            answers.append(recall_tool.not_found(call, wanted))
        else:
            answers.append(recall_tool.recalled(call, found, pointers.changed_since(found, history, open_fingerprint)))

    def with_answers(shown: Sequence[Answer]) -> list[ChatMessage]:
        return [*messages, ChatMessage("assistant", text, tuple(calls)),
                *(ChatMessage("tool", a.text, tool_call_id=a.call.id) for a in shown)]

    # What the calls cost with empty answers, then each answer in order while it fits.
    base = await counter.count_chat(with_answers([dataclasses.replace(a, text="") for a in answers]), tools)
    sizes = await counter.count_texts([a.text for a in answers])
    used = 0
    for i, answer in enumerate(answers):
        if answer.recalled and base + used + sizes[i] > limit:
            answers[i] = recall_tool.over_budget(answer.call, answer.pointer or "", sizes[i], max(0, limit - base - used))
            sizes[i] = (await counter.count_texts([answers[i].text]))[0]
        used += sizes[i]
    while True:  # the whole counted exactly: the sum above is a close estimate of it
        sent = with_answers(answers)
        counted = await counter.count_chat(sent, tools)
        if counted <= limit:
            break
        recalled = [i for i, a in enumerate(answers) if a.recalled]
        if not recalled:
            return None
        largest = max(recalled, key=lambda i: sizes[i])
        answer = answers[largest]
        answers[largest] = recall_tool.over_budget(answer.call, answer.pointer or "", sizes[largest], 0)
        sizes[largest] = (await counter.count_texts([answers[largest].text]))[0]
    recalls.answers += answers
    recalls.tokens += sizes
    log.info("recall answered calls=%d recalled=%d tokens=%d", len(answers),
             sum(1 for a in answers if a.recalled), sum(sizes))
    return sent, counted
