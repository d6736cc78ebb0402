"""How a completion reaches a backend (SPEC J), chosen per backend by what it is and what it
answers, and remembered: a route that fails as unsupported is not tried again for that backend.

    infill               llama.cpp `/infill` — when the served model has fill-in-the-middle tokens
    mistral_fim          Mistral's `/fim/completions` (Codestral)
    completions_suffix   `/completions` with `suffix` (Ollama and other OpenAI-style servers)
    raw_fim              `/completions` with the model family's FIM tokens in the prompt (vLLM,
                         which rejects `suffix`)
    chat                 a chat model asked to fill the hole, answering one JSON field — works
                         everywhere, so it is always the last resort

Whether llama.cpp's model has FIM tokens is asked of llama.cpp itself: a one-token `/infill`
request answers `not_supported_error` when it has not.

Where `margin doctor --probe` has tried the routes on this backend and model (services.probe_findings),
the route that filled its hole is taken without asking again, and the routes the backend refused
are skipped; a route that answered wrongly is not a refusal, so it stays in its place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from urllib.parse import urlsplit

from margin.core.completion.formats import Route
from margin.core.fim import FimRequest
from margin.core.llm import BackendInfo, LLMProvider, NotSupported, ProviderError
from margin.services.probe_findings import FindingLookup

log = logging.getLogger(__name__)

DESCRIPTIONS: dict[str, str] = {
    "infill": "llama.cpp /infill (the model has fill-in-the-middle tokens)",
    "mistral_fim": "Mistral FIM (/fim/completions)",
    "completions_suffix": "/completions with suffix (the server applies the model's FIM template)",
    "raw_fim": "/completions with the model family's FIM tokens in the prompt",
    "chat": "a chat model fills a marked hole (no fill-in-the-middle route)",
}

INFILL_PROBE = FimRequest("infill", "", "", max_tokens=1, cache_prompt=False)
"""one token for nothing, the prompt not kept"""


def candidate_routes(info: BackendInfo, base_url: str, model: str | None, knows_fim_family: bool) -> list[Route]:
    """The routes worth trying for this backend, best first; `knows_fim_family`: the model's
    name says which FIM tokens it was trained with."""
    host = urlsplit(base_url).hostname or ""
    name = (model or "").lower()
    if info.kind == "llama.cpp":
        return ["infill", "chat"]
    if host.endswith("mistral.ai") or "codestral" in name:
        return ["mistral_fim", "chat"]
    if host.endswith("openai.com"):
        return ["chat"]
    if info.kind == "vllm":
        return ["raw_fim", "chat"] if knows_fim_family else ["chat"]
    return ["completions_suffix", "raw_fim", "chat"] if knows_fim_family else ["chat"]


class RouteMemory:
    """The route each backend (base URL and model) uses, found once; routes that failed as
    unsupported are never tried again for it (until the settings point elsewhere)."""

    def __init__(self, findings: FindingLookup = lambda base_url, model, info: None) -> None:
        self._unsupported: dict[tuple[str, str | None], set[Route]] = {}
        self._chosen: dict[tuple[str, str | None], asyncio.Task[Route]] = {}
        self._findings = findings

    def unsupported(self, base_url: str, model: str | None, route: Route) -> None:
        """`route` failed as unsupported: forget the choice, and skip it from now on."""
        key = (base_url, model)
        self._unsupported.setdefault(key, set()).add(route)
        self._chosen.pop(key, None)
        log.info("completion route unsupported base_url=%s route=%s", base_url, route)

    def usable(self, base_url: str, model: str | None, routes: list[Route],
               refused: Collection[str] = ()) -> list[Route]:
        skip = self._unsupported.get((base_url, model), set()) | set(refused)
        return [route for route in routes if route not in skip] or ["chat"]

    async def route(self, provider: LLMProvider, info: BackendInfo, base_url: str, model: str | None,
                    knows_fim_family: bool) -> Route:
        """The route to use now: found by probing the first time (concurrent callers share one
        probe), then remembered."""
        key = (base_url, model)
        chosen = self._chosen.get(key)
        if chosen is None or (chosen.done() and (chosen.cancelled() or chosen.exception() is not None)):
            routes = candidate_routes(info, base_url, model, knows_fim_family)
            found = self._findings(base_url, model, info)
            probed = found.fill_route if found is not None else None
            routes = self.usable(base_url, model, routes, found.refused_routes if found is not None else set())
            if probed in routes:
                routes.remove(probed)
                routes.insert(0, probed)
                log.info("completion route from probe base_url=%s route=%s", base_url, probed)
            chosen = self._chosen[key] = asyncio.ensure_future(
                self._first_working(provider, base_url, model, routes, probed))
            # Its failure is logged where it happens and reaches every caller still waiting; a
            # caller that stopped waiting (the server shutting down) must not leave it unread.
            chosen.add_done_callback(lambda task: task.cancelled() or task.exception())
        return await asyncio.shield(chosen)

    async def _first_working(self, provider: LLMProvider, base_url: str, model: str | None,
                             routes: list[Route], probed: str | None = None) -> Route:
        for route in routes:
            if route != "infill" or route == probed:
                return route  # the others are found out on first use (unsupported is remembered)
            try:
                await provider.fill(INFILL_PROBE)
                return route
            except NotSupported:
                self._unsupported.setdefault((base_url, model), set()).add(route)
                log.info("completion route unsupported base_url=%s route=%s", base_url, route)
            except ProviderError as error:  # unreachable or failing now: not a verdict on the route
                log.info("completion route probe failed base_url=%s route=%s error=%s", base_url, route, error.kind)
                raise
        return "chat"
