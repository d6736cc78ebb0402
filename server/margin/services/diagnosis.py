"""What each profile would run with right now: backend reachable or not, the context window and
where it came from, the tokenizer. Shared by `margin/status` and `margin doctor`."""

from __future__ import annotations

import asyncio
import contextlib

from pydantic import BaseModel, ConfigDict

from margin.core.budget import system_prompt_warning
from margin.core.completion.formats import family_for
from margin.core.llm import ProviderError
from margin.core.settings import PROFILES, Settings
from margin.core.tokens.choice import choose_tokenizer
from margin.services.app import MarginApp
from margin.services.backends import Backends
from margin.services.completion_routes import RouteMemory
from margin.services.errors import RequestError
from margin.services.profile import resolve_profile, snapshot
from margin.services.tokenizers import REMOTE, Tokenizers


class ProfileStatus(BaseModel):
    """What a profile would run with right now. margin/status sends it as it is (camelCase,
    lsp.wire_status.ProfileStatusModel); `margin doctor` shows it as a ProfileReport."""

    enabled: bool
    model: str | None
    """null: the backend's default model"""
    base_url: str
    """the backend's OpenAI-compatible URL"""
    api_key: str
    """whether requests carry the API key `apiKeyEnv` names, and why (or why not): "none
    configured", "$VAR is set; sent to https://host only", or what keeps it back"""
    reachable: bool | None
    """null for a disabled profile (not probed); true for a busy backend, with `error` saying so"""
    backend: str | None
    """the kind of server found: llama.cpp, vllm or openai-compatible; null when not reached"""
    context_window: int
    """in tokens"""
    context_window_source: str
    """where the window came from: the setting, the backend, the model's documentation, or the fallback"""
    tokenizer: str
    """the tokenizer it counts with"""
    exact: bool
    """false when it counts with the heuristic (an upper bound)"""
    tokenizer_state: str
    """ready, loading, remote (the backend's /tokenize) or `unavailable: <why>`"""
    error: str | None
    """what is wrong, for a person"""
    completion_route: str | None = None
    """the completion profile's route (infill, mistral_fim, completions_suffix, raw_fim, chat),
    once found; null for the other profiles"""
    agent_protocol: str | None = None
    """the agent profile's action protocol (native, json, text) and how it was known; null for
    the other profiles"""


class ProfileReport(ProfileStatus):
    """A profile's status by name, and whether its probe timed out (margin/status says so in
    `error`; `margin doctor` tells a busy backend from an unreachable one by it)."""

    model_config = ConfigDict(frozen=True)

    name: str
    timed_out: bool = False
    """the probe got no answer in time: with `reachable`, the backend is there but busy"""

    def as_dict(self) -> dict[str, object]:
        """As `margin doctor --json` shows it: the name first."""
        return {"name": self.name, **self.model_dump(exclude={"name"})}


async def diagnose(
    settings: Settings,
    backends: Backends,
    tokenizers: Tokenizers,
    *,
    fresh: bool = False,
    wait_for_tokenizers: bool = False,
    routes: RouteMemory | None = None,
) -> list[ProfileReport]:
    """One report per profile. Enabled profiles' backends are probed (concurrently, each backend
    at most once, however many profiles use it); disabled ones are reported without contacting
    anything. With `wait_for_tokenizers`, in-process tokenizers are built first, so the report
    says whether they loaded. With `routes`, the completion profile's route is found (probed
    once per backend, then remembered) and reported."""

    async def report(name: str) -> ProfileReport:
        profile = settings.profile(name)
        info = await backends.probe(name, profile, fresh=fresh) if profile.enabled else None
        window, source = backends.context_window(profile, info)
        choice = choose_tokenizer(profile.tokenizer, profile.model, info.kind if info else None)
        if wait_for_tokenizers and profile.enabled:
            await tokenizers.counter(choice, profile.base_url, profile.timeout_s)
        if choice.kind in REMOTE and info is not None and info.reachable:
            # Asked once (the count is cached): a server that does not count is reported as such.
            counter = await tokenizers.counter(choice, profile.base_url, profile.timeout_s, backends.key_for(profile))
            with contextlib.suppress(ProviderError):
                await counter.count_texts(["margin"])
        tokenizer = tokenizers.state(choice)
        key = backends.api_key(profile)
        error = info.error if info else None
        if key.needed and not key.send:
            problem = (f"the API key variable ${key.variable} (apiKeyEnv) is not set" if key.missing
                       else key.why)
            error = problem + (f"; {error}" if error else "")
        route = None
        if name == "completion" and routes is not None and info is not None and info.reachable:
            try:
                route = await routes.route(backends.provider(name, profile), info, profile.base_url, profile.model,
                                           family_for(profile.model) is not None)
            except ProviderError:
                route = None  # the backend failed just now: the status says so already
        return ProfileReport(
            name=name,
            enabled=profile.enabled,
            base_url=profile.base_url,
            model=profile.model,
            api_key=key.why,
            reachable=info.reachable if info else None,
            backend=info.kind if info else None,
            context_window=window,
            context_window_source=source,
            tokenizer=tokenizer.name,
            exact=tokenizer.exact,
            tokenizer_state=tokenizer.state,
            error=error,
            timed_out=info.timed_out if info else False,
            completion_route=route,
            agent_protocol=(" · ".join(backends.agent_protocol(profile, info))
                            if name == "agent" and info is not None and info.reachable else None),
        )

    return list(await asyncio.gather(*(report(name) for name in PROFILES)))


async def system_prompt_warnings(app: MarginApp) -> list[str]:
    """For each enabled profile whose template exists: a warning when its required system
    prompt takes more than a quarter of the context window (or does not fit at all)."""
    warnings = []
    for name in PROFILES:
        settings = snapshot(app, name)
        if not settings.enabled:
            continue
        try:
            profile = await resolve_profile(app, name, settings)
        except RequestError:
            continue  # a missing template is reported when the profile is used
        try:
            (tokens,) = await profile.counter.count_texts([profile.system])
        except ProviderError:  # an unreachable llama.cpp server is reported by status already
            continue
        window, template = profile.window, settings.template
        if tokens > window - profile.max_output_tokens:
            warnings.append(f"Margin: the {name} profile's system prompt ({template}) is {tokens} "
                            f"tokens, more than its {window}-token window leaves after "
                            f"{profile.max_output_tokens} reserved for the reply: requests will fail.")
        elif (warning := system_prompt_warning(tokens, window)) is not None:
            warnings.append(f"Margin ({name} profile, template {template}): {warning}")
    return warnings
