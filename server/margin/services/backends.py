"""The model backends the profiles point at: one provider per profile (rebuilt when its
connection settings change) and probes of each backend, cached briefly and shared."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from margin.core.llm import BackendInfo, LLMProvider
from margin.core.models import resolve_context_window
from margin.core.settings import ProfileSettings

log = logging.getLogger(__name__)

RequestObserver = Callable[[str, dict[str, Any]], None]
ProviderFactory = Callable[[str, float, "str | None", "RequestObserver | None"], LLMProvider]
"""(base_url, timeout_s, api_key, on_request) → provider; on_request sees (url, JSON body) of
each request just before it is sent"""

PROBE_TTL_S = 30.0


@dataclass(frozen=True)
class ApiKeyState:
    needed: bool
    present: bool
    variable: str | None

    def describe(self) -> str:
        if not self.needed:
            return "none configured"
        return f"${self.variable} is set" if self.present else f"${self.variable} is NOT set"


class Backends:
    def __init__(self, make_provider: ProviderFactory, environ: Mapping[str, str]) -> None:
        self._make_provider = make_provider
        self._environ = environ
        self._providers: dict[str, tuple[tuple[str, float, str | None], LLMProvider]] = {}
        self._probes: dict[tuple[str, str | None, str | None], tuple[float, asyncio.Task[BackendInfo]]] = {}
        self._retired: list[LLMProvider] = []
        self.show_request: Callable[[str, str, dict[str, Any]], None] | None = None
        """(profile, url, body) of every model request, for a user who asked to see them"""

    def _observe(self, profile: str, url: str, body: dict[str, Any]) -> None:
        if self.show_request is not None:
            self.show_request(profile, url, body)

    def api_key(self, profile: ProfileSettings) -> ApiKeyState:
        if not profile.api_key_env:
            return ApiKeyState(False, False, None)
        return ApiKeyState(True, bool(self._environ.get(profile.api_key_env)), profile.api_key_env)

    def provider(self, name: str, profile: ProfileSettings) -> LLMProvider:
        key = self._environ.get(profile.api_key_env) if profile.api_key_env else None
        wanted = (profile.base_url, profile.timeout_s, key)
        current = self._providers.get(name)
        if current and current[0] == wanted:
            return current[1]
        if current:
            self._retired.append(current[1])
        provider = self._make_provider(profile.base_url, profile.timeout_s, key,
                                       lambda url, body: self._observe(name, url, body))
        self._providers[name] = (wanted, provider)
        return provider

    async def probe(self, name: str, profile: ProfileSettings, *, fresh: bool = False) -> BackendInfo:
        """What the profile's backend says about itself. Concurrent callers share one probe;
        results are reused for PROBE_TTL_S."""
        provider = self.provider(name, profile)
        key = (profile.base_url, profile.api_key_env, profile.model)
        cached = self._probes.get(key)
        now = time.monotonic()
        if cached and not fresh and now - cached[0] < PROBE_TTL_S:
            return await asyncio.shield(cached[1])
        task = asyncio.ensure_future(self._probe(provider, profile))
        self._probes[key] = (now, task)
        return await asyncio.shield(task)

    async def _probe(self, provider: LLMProvider, profile: ProfileSettings) -> BackendInfo:
        started = time.perf_counter()
        info = await provider.probe(profile.model)
        log.info(
            "probe base_url=%s reachable=%s kind=%s n_ctx=%s ms=%.0f",
            profile.base_url, info.reachable, info.kind, info.context_window,
            (time.perf_counter() - started) * 1000,
        )
        return info

    @staticmethod
    def context_window(profile: ProfileSettings, info: BackendInfo | None) -> tuple[int, str]:
        return resolve_context_window(
            profile.context_window,
            info.context_window if info else None,
            info.context_window_source if info else None,
            profile.model,
        )

    async def aclose(self) -> None:
        for task in (entry[1] for entry in self._probes.values()):
            task.cancel()
        providers = [entry[1] for entry in self._providers.values()] + self._retired
        self._providers.clear()
        self._retired.clear()
        await asyncio.gather(*(p.aclose() for p in providers), return_exceptions=True)
