"""The model backends the profiles point at: one provider per profile (rebuilt when its
connection settings change) and probes of each backend (base URL and API key), shared by every
profile on it, cached briefly unless they timed out. A profile's API key goes with its requests
only where margin.core.api_keys allows: to the base URL set in the same place as `apiKeyEnv`,
never over plain HTTP off this machine."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from margin import logs
from margin.core import api_keys
from margin.core.agent.actions import Protocol
from margin.core.llm import BackendInfo, LLMProvider
from margin.core.models import resolve_context_window
from margin.core.settings import ProfileSettings
from margin.services.probe_findings import FindingLookup

log = logging.getLogger(__name__)

RequestObserver = Callable[[str, dict[str, Any]], None]
ProviderFactory = Callable[[str, float, "str | None", "RequestObserver | None"], LLMProvider]
"""(base_url, timeout_s, api_key, on_request) → provider; on_request sees (url, JSON body) of
each request just before it is sent"""

PROBE_TTL_S = 30.0


def _reusable(probe: asyncio.Task[BackendInfo]) -> bool:
    """A finished probe whose answer may be given again: not cancelled, failed or timed out."""
    return not probe.cancelled() and probe.exception() is None and not probe.result().timed_out


class Backends:
    def __init__(self, make_provider: ProviderFactory, environ: Mapping[str, str]) -> None:
        self._make_provider = make_provider
        self._environ = environ
        self._providers: dict[str, tuple[tuple[str, float, str | None], LLMProvider]] = {}
        self._probes: dict[tuple[str, str | None], tuple[float, asyncio.Task[BackendInfo]]] = {}
        """(base URL, API key) → (when the probe started, the probe)"""
        self._retired: list[LLMProvider] = []
        self._no_tools: set[tuple[str, str | None]] = set()
        """(base URL, model) that refused a request with tools"""
        self.show_request: Callable[[str, str, dict[str, Any]], None] | None = None
        """(profile, url, body) of every model request, for a user who asked to see them"""
        self.findings: FindingLookup = lambda base_url, model, info: None
        """what `margin doctor --probe` found about a backend and model (services.probe_findings)"""

    def _observe(self, profile: str, url: str, body: dict[str, Any]) -> None:
        if self.show_request is not None:
            self.show_request(profile, url, body)

    def api_key(self, profile: ProfileSettings) -> api_keys.KeyDecision:
        """Whether the profile's requests carry its API key, and why (or why not)."""
        variable = profile.api_key_env
        return api_keys.decide(variable, profile.base_url, profile.key_route,
                               bool(variable and self._environ.get(variable)))

    def key_for(self, profile: ProfileSettings) -> str | None:
        """The API key the profile's requests carry (None when none is sent: api_key decides)."""
        return self._environ.get(profile.api_key_env) if self.api_key(profile).send and profile.api_key_env else None

    def provider(self, name: str, profile: ProfileSettings) -> LLMProvider:
        wanted = (profile.base_url, profile.timeout_s, self.key_for(profile))
        current = self._providers.get(name)
        if current and current[0] == wanted:
            return current[1]
        if current:
            self._retired.append(current[1])
        if profile.api_key_env and wanted[2] is None and self._environ.get(profile.api_key_env):
            log.warning("api key withheld profile=%s variable=%s base_url=%s", name,
                        logs.name(profile.api_key_env), logs.name(profile.base_url))
        provider = self._make_provider(profile.base_url, profile.timeout_s, wanted[2],
                                       lambda url, body: self._observe(name, url, body))
        self._providers[name] = (wanted, provider)
        return provider

    async def probe(self, name: str, profile: ProfileSettings, *, fresh: bool = False) -> BackendInfo:
        """What the profile's backend says about itself. A probe is of a backend (base URL and
        API key), not of a profile or a model: every caller shares a probe in flight, `fresh`
        or not (it started after they asked). A finished one is reused for PROBE_TTL_S unless
        `fresh`, and never when it timed out or failed."""
        provider = self.provider(name, profile)
        key = (profile.base_url.rstrip("/"), self.key_for(profile))
        cached = self._probes.get(key)
        now = time.monotonic()
        if cached and (not cached[1].done() or (
                not fresh and now - cached[0] < PROBE_TTL_S and _reusable(cached[1]))):
            return await asyncio.shield(cached[1])
        task = asyncio.ensure_future(self._probe(provider, profile.base_url))
        self._probes[key] = (now, task)
        return await asyncio.shield(task)

    async def _probe(self, provider: LLMProvider, base_url: str) -> BackendInfo:
        started = time.perf_counter()
        info = await provider.probe()  # the window per model is read from it afterwards
        log.info(
            "probe base_url=%s reachable=%s timed_out=%s kind=%s n_ctx=%s ms=%.0f",
            base_url, info.reachable, info.timed_out, info.kind, info.context_window,
            (time.perf_counter() - started) * 1000,
        )
        return info

    def takes_tools(self, profile: ProfileSettings, info: BackendInfo | None) -> bool:
        """Whether requests to the profile's backend may offer tools: not once it refused them;
        else as `margin doctor --probe` found when it offered the model a tool (a model that
        answered in text is not offered the recall tool either); else not when the backend says it
        cannot (llama.cpp without a tool-capable chat template)."""
        if (profile.base_url.rstrip("/"), profile.model) in self._no_tools:
            return False
        found = self.findings(profile.base_url, profile.model, info)
        if found is not None and found.takes_tools is not None:
            return found.takes_tools
        return info is None or info.tools is not False

    def agent_protocol(self, profile: ProfileSettings, info: BackendInfo | None) -> tuple[Protocol, str]:
        """How the model acts as the agent (core.agent.actions), and how that was known: as
        `margin doctor --probe` found; else native tool calls where the backend takes tools and
        the model was not found to answer a tool in text; else one JSON action held to a schema
        where the backend holds answers to one (llama.cpp, vLLM); else actions in its text."""
        found = self.findings(profile.base_url, profile.model, info)
        if found is not None and found.agent_protocol in ("native", "json", "text"):
            return found.agent_protocol, "found by margin doctor --probe"  # type: ignore[return-value]
        if self.takes_tools(profile, info) and not (found is not None and found.takes_tools is False) \
                and info is not None and info.tools is True:
            return "native", "the backend takes tools (not probed: margin doctor --probe tries the model)"
        if info is not None and info.kind in ("llama.cpp", "vllm"):
            return "json", f"{info.kind} holds an answer to a JSON schema (not probed: margin doctor --probe tries the model)"
        return "text", "assumed (not probed: margin doctor --probe tries the model)"

    def refused_tools(self, profile: ProfileSettings) -> None:
        """The backend refused a request for offering tools: never offer them to it again."""
        self._no_tools.add((profile.base_url.rstrip("/"), profile.model))
        log.info("backend refused tools base_url=%s", profile.base_url)

    @staticmethod
    def context_window(profile: ProfileSettings, info: BackendInfo | None) -> tuple[int, str]:
        detected, source = info.window_for(profile.model) if info else (None, None)
        window, found = resolve_context_window(profile.context_window, detected, source, profile.model)
        if info is not None and info.silent_cut and detected and window > detected:  # Ollama: never past it
            window, found = detected, f"{source} (it cuts a longer prompt silently: contextWindow {window} lowered)"
        cap = profile.window_cap
        if cap is not None and cap < window:
            return cap, f"{found}, lowered to {cap} by workspace settings"
        return window, found

    async def aclose(self) -> None:
        for task in (entry[1] for entry in self._probes.values()):
            task.cancel()
        providers = [entry[1] for entry in self._providers.values()] + self._retired
        self._providers.clear()
        self._retired.clear()
        await asyncio.gather(*(p.aclose() for p in providers), return_exceptions=True)
