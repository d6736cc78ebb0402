"""The model calls every structured use case shares: fitting an assembled prompt to the window
by its exact count, and one call that asks for JSON matching a schema (edit-ops, selection
edits, and next completion's chat route).

`ask_json` sends the schema as `response_format` (llama.cpp and OpenAI constrain the output to
it), then validates the answer with the same pydantic model. Every way it can fail — the prompt
refused as too large, an upstream error, an answer cut off at maxOutputTokens, prose or JSON
that does not follow the schema — is one `AnswerFailed` whose message says what to do.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from margin.core.answer_schema import answer_schema
from margin.core.budget import Plan
from margin.core.editops import ReplyRejected, parse_answer
from margin.core.llm import BackendHTTPError, ChatMessage, ContextTooLarge, ProviderError
from margin.core.tokens.counter import TOOLS_OVERHEAD, LocalCounter, TokenCounter, off_loop
from margin.services.chat_tools import ToolsRefused, refuses_tools
from margin.services.errors import RequestError
from margin.services.profile import Profile

log = logging.getLogger(__name__)


class Assembled(Protocol):
    messages: list[ChatMessage]
    plan: Plan


A = TypeVar("A", bound=Assembled)
FIT_ROUNDS = 4
"""How many times a prompt is assembled again with less room before it is declared too large."""
M = TypeVar("M", bound=BaseModel)


async def framing_tokens(counter: TokenCounter) -> int:
    """The fixed cost of a prompt's framing (reply priming, begin-of-text) for an in-process
    tokenizer; a server's tokenizer counts the whole prompt instead (0 here)."""
    return await counter.count_chat([]) if isinstance(counter, LocalCounter) else 0


async def tools_tokens(counter: TokenCounter, tools: Sequence[dict[str, Any]]) -> int:
    """What offering `tools` adds to a prompt: counted by an in-process tokenizer's rules, or by
    a server's tokenizer as their JSON with the allowance for markers (the whole prompt is then
    counted exactly, tools included, and cut further if this fell short)."""
    if not tools:
        return 0
    if isinstance(counter, LocalCounter):
        return counter.count_chat_now([], tools) - counter.count_chat_now([])
    text = json.dumps(list(tools), separators=(",", ":"))
    return (await counter.count_texts([text]))[0] + TOOLS_OVERHEAD


async def sync_count(counter: TokenCounter, texts: Sequence[str], code: Sequence[str]) -> Callable[[str], int]:
    """A synchronous count for an assembler. An in-process tokenizer counts anything exactly; a
    server's tokenizer counts `texts` and each line of `code` once (in one request), and any
    other text — a joined run of lines — is estimated as the sum of its lines (the whole prompt
    is then counted exactly where it matters, and cut further if the estimate fell short)."""
    if isinstance(counter, LocalCounter):
        return counter.count
    lines = [line for text in code for line in text.splitlines(keepends=True)]
    wanted = list(dict.fromkeys([*texts, *lines]))
    known = dict(zip(wanted, await counter.count_texts(wanted)))

    def count(text: str) -> int:
        found = known.get(text)
        return found if found is not None else sum(known.get(line, len(line)) for line in text.splitlines(keepends=True))

    return count


async def fit_prompt(assemble: Callable[[int], A], counter: TokenCounter, window: int, *,
                     counts: bool = False) -> tuple[A, int]:
    """Assemble for the window, count the prompt whole, and if framing the estimate could not
    see makes it larger than the limit, assemble again with that much less room (a few rounds
    at most). The report keeps the real window and limit. An assembly that `counts` (a selection
    edit's trimmers count as they cut) runs in a counting thread, never holding the event loop;
    one over texts counted before (chat's) stays on the loop, where it costs less than the hop."""
    room = window
    for _ in range(FIT_ROUNDS):
        assembly = await off_loop(functools.partial(assemble, room)) if counts else assemble(room)
        if room == window:
            limit = assembly.plan.limit
        tools = getattr(assembly, "tools", ())  # a chat prompt may offer tools: they count too
        counted = await counter.count_chat(assembly.messages, tools) if assembly.messages else 0
        if counted <= limit:
            break
        # The plan must hold `counted - limit` fewer tokens than it does now.
        room -= (assembly.plan.limit - assembly.plan.total) + (counted - limit)
    assembly.plan.context_window, assembly.plan.limit = window, limit
    if counted > limit and assembly.plan.over_budget is None:
        # Never send a prompt the tokenizer counts over the limit, whatever the estimate said.
        assembly.plan.over_budget = (
            f"Too large to send: the prompt counts {counted} tokens with {counter.name}, but only {limit} "
            f"fit (context window {window} − reserved output {assembly.plan.reserved_output} − safety margin).")
    return assembly, counted


class AnswerFailed(RequestError):
    """The model's answer cannot be used; nothing was changed."""


async def ask_text(profile: Profile, messages: Sequence[ChatMessage], *, smaller: str,
                   response_format: dict | None = None, cut_is_usable: bool = False,
                   tools: Sequence[dict[str, Any]] = ()) -> str:
    """Ask `profile`'s model (in `response_format`, when given) and return its whole answer; an
    answer cut off at maxOutputTokens is not used (`smaller` says how to ask for less) unless
    `cut_is_usable` (code whose start is what matters, as in a completion). `tools` are offered
    with `tool_choice: none` (the thread's chat offers them, and a prompt that starts the same
    keeps the backend's prompt cache); ToolsRefused if the backend refuses them."""
    try:
        reply = await profile.provider.complete(profile.request(messages, response_format, tools, "none"))
    except ContextTooLarge as error:
        raise AnswerFailed(str(error)) from None
    except BackendHTTPError as error:
        if tools and refuses_tools(error):
            raise ToolsRefused() from None
        log.warning("structured call failed profile=%s error=%s", profile.name, error.kind)
        raise AnswerFailed(f"{error} Nothing was changed.") from None
    except ProviderError as error:
        log.warning("structured call failed profile=%s error=%s", profile.name, error.kind)
        raise AnswerFailed(f"{error} Nothing was changed.") from None
    if reply.finish_reason == "length" and not cut_is_usable:
        raise AnswerFailed(
            f"The model's answer was cut off at maxOutputTokens ({profile.max_output_tokens}), so it "
            f"cannot be used. Raise {profile.name}.maxOutputTokens, or {smaller}.")
    return reply.content


async def ask_json(profile: Profile, messages: Sequence[ChatMessage], answer: type[M], *, schema_name: str,
                   described_as: str, smaller: str, retry: str, tools: Sequence[dict[str, Any]] = ()) -> M:
    """Ask `profile`'s model for one JSON object following `answer`'s schema, and validate it.

    `schema_name` names the schema in `response_format`; `described_as` names it to a person
    ("the edit schema"); `smaller` says how to ask for less when the answer was cut off ("select
    less code"); `retry` ends the message of an answer that is not valid ("Try again.")."""
    content = await ask_text(profile, messages, smaller=smaller, tools=tools, response_format={
        "type": "json_schema", "json_schema": {"name": schema_name, "schema": answer_schema(answer)}})
    try:
        return parse_answer(answer, content, described_as)
    except ReplyRejected as error:
        log.warning("structured answer unusable profile=%s", profile.name)
        raise AnswerFailed(f"Nothing was changed: {error}. {retry}") from None
