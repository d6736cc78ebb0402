"""Inline completion: the suggestion at a cursor, from the `completion` profile.

One request per document is in flight: a newer one cancels the older, which aborts its HTTP
call. The document is read once, at the request's version; if it has moved on by the time the
model answers, the answer is dropped (it was for text the user no longer has). A small cache
answers typing along a shown suggestion, and going back to where it was shown, with no backend
request. The route (llama.cpp /infill, Mistral FIM, /completions, raw FIM, or a chat model
filling a hole) is found per backend and remembered (services.completion_routes); the prompt is
budgeted by exact tokens (core.completion.prompt) and the answer cleaned (core.completion.
postprocess). A completion never raises for a person to see: no suggestion, and a log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from margin import logs
from margin.core.budget import BudgetReport, Window
from margin.core.completion import formats
from margin.core.completion.junk import Silence
from margin.core.completion.postprocess import CompletionContext, Suggestion, clean, judge
from margin.core.completion.prompt import (
    CONTEXT_CHARS_PER_TOKEN,
    CompletionInput,
    CompletionPrompt,
    RecentCode,
    Snippet,
    assemble_completion,
)
from margin.core.llm import NotSupported, ProviderError
from margin.core.tokens.counter import LocalCounter, TokenCounter
from margin.core.vfs import Position, Range, VirtualFile
from margin.services.app import MarginApp
from margin.services.background import COMPLETION
from margin.services.errors import RequestError
from margin.services.profile import Profile, resolve_profile, snapshot
from margin.services.structured import ask_json, ask_text, framing_tokens, sync_count

log = logging.getLogger(__name__)

PROFILE = "completion"
CACHE_ENTRIES = 64


MAX_SNIPPETS = 3
"""Other open files a prompt may show a window of (recently edited first)."""
SNIPPET_LINES = 40
"""Lines of such a window, around where the file was last edited (else its first lines)."""
MAX_SNIPPET_CHARS = 160 * SNIPPET_LINES
"""A window of another file longer than this (lines of a minified bundle) is left out."""
SUPERSEDED_CLOSE_S = 0.05
"""How long a request waits for the work it replaced to stop (its HTTP call closed) before
starting its own: a few event-loop turns, unless something is wrong."""
SHORT_TEXT_CHARS, SHORT_COUNTS = 512, 100_000
"""Counts of texts up to this long (the lines of the code around the cursor, which the budget
counts one by one on every request) kept per in-process tokenizer, up to this many."""


class ShortCounts:
    """Exact counts of short texts by the text itself, for an in-process tokenizer: a dict lookup,
    far cheaper than the tokenizer's own cache by content hash, for the thousands of lines a
    request around a 3,000-line file counts; and the code around the cursor of recent requests
    with its line counts (`RecentCode`)."""

    def __init__(self) -> None:
        self._counter: TokenCounter | None = None
        self._counts: dict[str, int] = {}
        self.recent: RecentCode | None = None
        """the code around the cursor in recent requests, counted with this tokenizer"""

    def counting(self, counter: TokenCounter, count: Callable[[str], int]) -> Callable[[str], int]:
        if not isinstance(counter, LocalCounter):
            return count  # a server's counts come per request, some of them estimates
        if counter is not self._counter or len(self._counts) > SHORT_COUNTS:
            self._counter, self._counts, self.recent = counter, {}, RecentCode()
        counts = self._counts

        def counted(text: str) -> int:
            found = counts.get(text)
            if found is None:
                found = count(text)
                if len(text) <= SHORT_TEXT_CHARS:
                    counts[text] = found
            return found

        def many(texts: list[str]) -> list[int]:
            """Counts of many texts, the known ones looked up all at once."""
            found = list(map(counts.get, texts))
            if None not in found:  # the usual case while typing: all known
                return cast("list[int]", found)
            return [n if n is not None else counted(t) for n, t in zip(found, texts)]

        counted.many = many  # type: ignore[attr-defined]
        return counted


@dataclass(frozen=True)
class CompletionRequest:
    uri: str
    position: Position
    version: int | None = None
    """the document version the editor asked at, when it says (an older one is answered empty)"""


@dataclass
class CompletionOutcome:
    suggestion: Suggestion | None
    route: formats.Route | None = None
    budget: BudgetReport | None = None
    cached: bool = False
    reason: str | None = None
    """why there is no suggestion, for the log and the terminal"""
    silence: str | None = None
    """the model answered, and post-processing found nothing to show: why (core/completion/junk.py
    REASONS), metadata the evaluations count"""
    range: Range | None = None
    """what the suggestion replaces, in the editor's position encoding: from the cursor to the
    end of the auto-closed characters it rewrites (on the cursor's line)"""


class SuggestionCache:
    """Recent suggestions by document and the text around the cursor they were made for: the same
    place again (backspace) gives the same suggestion, and typing its first characters gives the
    rest — neither asks the backend."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self._entries: OrderedDict[tuple[str, int, int, int], Suggestion] = OrderedDict()
        self._max = entries

    def store(self, uri: str, prefix: str, suffix: str, suggestion: Suggestion) -> None:
        key = (uri, len(prefix), hash(prefix), hash(suffix))
        self._entries[key] = suggestion
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def lookup(self, uri: str, prefix: str, suffix: str) -> Suggestion | None:
        exact = self._entries.get((uri, len(prefix), hash(prefix), hash(suffix)))
        if exact is not None:
            return exact
        after = hash(suffix)
        for (known_uri, length, before, known_after), suggestion in reversed(self._entries.items()):
            if known_uri != uri or known_after != after or length >= len(prefix):
                continue
            typed = prefix[length:]
            if suggestion.text.startswith(typed) and len(typed) < len(suggestion.text) \
                    and hash(prefix[:length]) == before:
                return Suggestion(suggestion.text[len(typed):], suggestion.replaces)
        return None


class CompletionService:
    def __init__(self, app: MarginApp) -> None:
        self.app = app
        self.routes = app.completion_routes
        self.cache = SuggestionCache()
        self.short_counts = ShortCounts()
        self.answer_format: formats.HoleFormat = "fenced"
        """the chat route's answer format (benchmarks/eval_chat_holes.py measures both)"""
        self._running: dict[str, asyncio.Task[CompletionOutcome]] = {}
        self._newest: dict[str, object] = {}
        """by document: the newest request that asked the backend (an older one still waiting
        for the work it replaced to stop gives way to it)"""

    async def complete(self, request: CompletionRequest) -> CompletionOutcome:
        file = self.app.files.get(request.uri)
        if file is None:
            return CompletionOutcome(None, reason="the document is not open")
        if request.version is not None and request.version != file.version:
            log.info("completion for an old version uri=%s asked=%d current=%d", logs.name(file.uri), request.version,
                     file.version)
            return CompletionOutcome(None, reason=f"asked for version {request.version}, the document is at "
                                                  f"version {file.version}")
        settings = snapshot(self.app, PROFILE)
        if not settings.enabled:
            return CompletionOutcome(None, reason="completion is turned off (completion.enabled)")
        if request.position.line >= file.line_count:
            return CompletionOutcome(None, reason=f"line {request.position.line} is past the end of the document")
        offset = file.offset_at(request.position, self.app.files.encoding)
        prefix, suffix = file.text[:offset], file.text[offset:]
        if (hit := self.cache.lookup(file.uri, prefix, suffix)) is not None:
            return self._placed(CompletionOutcome(hit, cached=True), file, offset)
        mine = self._newest[file.uri] = object()
        previous = self._running.get(file.uri)
        if previous is not None and not previous.done():
            previous.cancel()  # the user typed on: its HTTP call is aborted, its answer of no use
            # Let it close its connection now, before this request's work (counting the prompt)
            # holds the event loop for milliseconds.
            await asyncio.wait([previous], timeout=SUPERSEDED_CLOSE_S)
            if self._newest.get(file.uri) is not mine:
                return CompletionOutcome(None, reason="a newer request for this document replaced it")
        work = asyncio.ensure_future(self._foreground(self._answer(file, prefix, suffix, settings)))
        self._running[file.uri] = work
        try:
            outcome = await work
        except asyncio.CancelledError:
            if (task := asyncio.current_task()) is not None and task.cancelling():
                raise  # this request itself was cancelled ($/cancelRequest): the work went with it
            return CompletionOutcome(None, reason="a newer request for this document replaced it")
        finally:
            if self._running.get(file.uri) is work:
                del self._running[file.uri]
            if self._newest.get(file.uri) is mine:
                del self._newest[file.uri]
        current = self.app.files.get(file.uri)  # the very text asked about (a change may keep the version)
        if current is None or current.text != file.text:
            return CompletionOutcome(None, outcome.route, outcome.budget, reason="the document changed meanwhile")
        if outcome.suggestion is not None:
            self.cache.store(file.uri, prefix, suffix, outcome.suggestion)
        return self._placed(outcome, file, offset)

    async def _foreground(self, answer: Awaitable[CompletionOutcome]) -> CompletionOutcome:
        async with self.app.queue.foreground(COMPLETION):  # first of all work (services.background)
            return await answer

    def _placed(self, outcome: CompletionOutcome, file: VirtualFile, offset: int) -> CompletionOutcome:
        if outcome.suggestion is not None:
            encoding = self.app.files.encoding
            outcome.range = Range(file.position_at(offset, encoding),
                                  file.position_at(offset + outcome.suggestion.replaces, encoding))
        return outcome

    async def _answer(self, file: VirtualFile, prefix: str, suffix: str, settings: Any) -> CompletionOutcome:
        try:
            return await self._ask(file, prefix, suffix, await resolve_profile(self.app, PROFILE, settings))
        except RequestError as error:
            log.info("completion failed uri=%s error=%s", logs.name(file.uri), type(error).__name__)
            return CompletionOutcome(None, reason=str(error))
        except ProviderError as error:  # the tokenizer's (the model call's are met in _ask)
            log.info("completion failed uri=%s error=%s", logs.name(file.uri), error.kind)
            return CompletionOutcome(None, reason=str(error))

    def snippets(self, file: VirtualFile) -> tuple[Snippet, ...]:
        """Windows of other open files, recently edited first: around the line last edited, else
        the file's first lines."""
        files = self.app.files
        edited = [f for f in files.recently_edited() if f.uri != file.uri]
        others = edited + [f for f in files.files() if f.uri != file.uri and f not in edited]
        snippets: list[Snippet] = []
        for other in others:
            if len(snippets) == MAX_SNIPPETS:
                break
            if not other.text.strip():
                continue
            starts = other.line_starts  # kept with the file's version: not split again per keystroke
            line = files.last_edit_line(other.uri)
            first = max(0, min(line - SNIPPET_LINES // 2, len(starts) - SNIPPET_LINES)) if line is not None else 0
            end = starts[first + SNIPPET_LINES] if first + SNIPPET_LINES < len(starts) else len(other.text)
            if end - starts[first] > MAX_SNIPPET_CHARS:  # a minified bundle's lines: not worth reading, or counting
                continue
            snippets.append(Snippet(self.app.workspace.file_id(other.uri), other.text[starts[first]:end],
                                    "recently edited" if other in edited else "open file"))
        return tuple(snippets)

    async def _ask(self, file: VirtualFile, prefix: str, suffix: str, profile: Profile) -> CompletionOutcome:
        settings = profile.settings
        family = formats.family_for(settings.model)
        info = await self.app.backends.probe(PROFILE, settings)
        try:
            route = await self.routes.route(profile.provider, info, settings.base_url, settings.model, family is not None)
        except ProviderError as error:
            return CompletionOutcome(None, reason=str(error))
        file_id = self.app.workspace.file_id(file.uri)
        for _ in range(3):  # a route found unsupported on first use gives way to the next
            extra = self.snippets(file) if formats.sends_extra(route, family) else ()
            prompt = await self._prompt(file_id, file.language_id, prefix, suffix, extra, route, family, profile)
            budget = prompt.plan.report()
            if prompt.over_budget:
                log.info("completion over budget uri=%s route=%s", logs.name(file.uri), route)
                return CompletionOutcome(None, route, budget, reason=prompt.over_budget)
            started = time.perf_counter()
            try:
                raw = await self._send(route, family, prompt, profile)
            except NotSupported:
                self.routes.unsupported(settings.base_url, settings.model, route)
                route = self.routes.usable(settings.base_url, settings.model, [route, "chat"])[0]
                continue
            except ProviderError as error:
                log.info("completion failed uri=%s route=%s error=%s", logs.name(file.uri), route, error.kind)
                return CompletionOutcome(None, route, budget, reason=str(error))
            made = judge(raw, self._context(route, family, file_id, file.language_id, prefix, suffix, profile))
            suggestion = made if isinstance(made, Suggestion) else None
            silence = made.reason if isinstance(made, Silence) else None
            log.info("completion done uri=%s route=%s prompt_tokens=%d chars_out=%d shown=%s silence=%s ms=%.0f",
                     logs.name(file.uri), route, budget.counted or budget.total, len(raw), suggestion is not None,
                     silence, (time.perf_counter() - started) * 1000)
            return CompletionOutcome(suggestion, route, budget, reason=f"nothing useful: {silence}" if silence else None,
                                     silence=silence)
        return CompletionOutcome(None, route, reason="no route works for this backend")

    async def try_route(self, route: formats.Route, file_id: str, language: str, prefix: str,
                        suffix: str, max_tokens: int | None = None) -> Suggestion | None:
        """The suggestion `route` gives for a hole between `prefix` and `suffix`, through the
        prompt, request and post-processing of a real completion but with the route chosen by
        the caller (`margin doctor --probe` tries each), and at most `max_tokens` out when
        given; raises the backend's ProviderError (NotSupported when the route is not offered)."""
        settings = snapshot(self.app, PROFILE)
        if max_tokens is not None:
            settings = settings.model_copy(update={"max_output_tokens": max_tokens})
        profile = await resolve_profile(self.app, PROFILE, settings)
        family = formats.family_for(profile.settings.model)
        prompt = await self._prompt(file_id, language, prefix, suffix, (), route, family, profile)
        if prompt.over_budget:
            raise RequestError(prompt.over_budget)
        raw = await self._send(route, family, prompt, profile)
        return clean(raw, self._context(route, family, file_id, language, prefix, suffix, profile))

    @staticmethod
    def _context(route: formats.Route, family: formats.FimFamily | None, file_id: str, language: str, prefix: str,
                 suffix: str, profile: Profile) -> CompletionContext:
        """What post-processing knows of the request: the code around the cursor, the family's
        tokens, and the chat route's own instructions (an answer repeating them is junk)."""
        instructions = formats.fixed_text(route, family, file_id=file_id, language=language,
                                          system=profile.system) if route == "chat" else ""
        return CompletionContext(prefix, suffix, language, family.strip if family is not None else (), instructions)

    async def _prompt(self, file_id: str, language: str, prefix: str, suffix: str, extra: tuple[Snippet, ...],
                      route: formats.Route, family: formats.FimFamily | None, profile: Profile) -> CompletionPrompt:
        """The prompt within the profile's window, counted with its tokenizer (the code around the
        cursor is read only as far as could ever fit)."""
        counter = profile.counter
        fixed = formats.fixed_text(route, family, file_id=file_id, language=language, has_extra=bool(extra),
                                   system=profile.system)

        def render(snippet: Snippet) -> str:
            return formats.snippet_text(route, family, snippet, file_id=file_id, language=language)

        reach = profile.window * CONTEXT_CHARS_PER_TOKEN
        count = self.short_counts.counting(
            counter, await sync_count(counter, [fixed, *map(render, extra)], [prefix[-reach:], suffix[:reach]]))
        framing = await framing_tokens(counter) if route == "chat" else 0
        return assemble_completion(
            CompletionInput(file_id, language, prefix, suffix, extra), count,
            Window(profile.window, profile.max_output_tokens, counter.name, counter.exact, framing),
            fixed_tokens=count(fixed), render_snippet=render,
            recent=self.short_counts.recent if isinstance(counter, LocalCounter) else None,
            cuts=counter.line_cuts if isinstance(counter, LocalCounter) else None)

    async def _send(self, route: formats.Route, family: formats.FimFamily | None, prompt: CompletionPrompt,
                    profile: Profile) -> str:
        s = profile.settings
        if route == "chat" and self.answer_format == "fenced":
            return formats.parse_fenced_answer(await ask_text(profile, formats.hole_messages(prompt, profile.system),
                                                              smaller="ask for less", cut_is_usable=True))
        if route == "chat":
            system = formats.hole_system(profile.system, "json")
            answer = await ask_json(profile, formats.hole_messages(prompt, system), formats.HoleAnswer,
                                    schema_name=formats.HOLE_SCHEMA_NAME, described_as="the completion schema",
                                    smaller="ask for less", retry="")
            return answer.completion
        request = formats.fim_request(route, prompt, family, model=s.model, max_tokens=s.max_output_tokens,
                                      temperature=s.temperature)
        return (await profile.provider.fill(request)).text
