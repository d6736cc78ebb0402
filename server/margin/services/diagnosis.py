"""What each profile would run with right now: backend reachable or not, the context window and
where it came from, the tokenizer. Shared by `margin/status` and `margin doctor`."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from typing import Any

from margin.core.settings import PROFILES, Settings
from margin.core.tokens.choice import choose_tokenizer
from margin.services.backends import Backends
from margin.services.tokenizers import Tokenizers


@dataclass(frozen=True)
class ProfileReport:
    name: str
    enabled: bool
    base_url: str
    model: str | None
    api_key: str
    reachable: bool | None
    backend: str | None
    context_window: int
    context_window_source: str
    tokenizer: str
    exact: bool
    tokenizer_state: str
    error: str | None

    def as_status(self) -> dict[str, object]:
        """The `margin/status` shape (camelCase)."""
        return {
            "enabled": self.enabled,
            "model": self.model,
            "baseUrl": self.base_url,
            "reachable": self.reachable,
            "backend": self.backend,
            "contextWindow": self.context_window,
            "contextWindowSource": self.context_window_source,
            "tokenizer": self.tokenizer,
            "exact": self.exact,
            "tokenizerState": self.tokenizer_state,
            "error": self.error,
        }

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


async def diagnose(
    settings: Settings,
    backends: Backends,
    tokenizers: Tokenizers,
    *,
    fresh: bool = False,
    wait_for_tokenizers: bool = False,
) -> list[ProfileReport]:
    """One report per profile. Enabled profiles' backends are probed (concurrently, each at most
    once); disabled ones are reported without contacting anything. With `wait_for_tokenizers`,
    in-process tokenizers are built first, so the report says whether they loaded."""

    async def report(name: str) -> ProfileReport:
        profile = settings.profile(name)
        info = await backends.probe(name, profile, fresh=fresh) if profile.enabled else None
        window, source = backends.context_window(profile, info)
        choice = choose_tokenizer(profile.tokenizer, profile.model, info.kind if info else None)
        if wait_for_tokenizers and profile.enabled:
            await tokenizers.counter(choice, profile.base_url, profile.timeout_s)
        tokenizer = tokenizers.state(choice)
        key = backends.api_key(profile)
        error = info.error if info else None
        if key.needed and not key.present:
            error = f"the API key variable ${key.variable} (apiKeyEnv) is not set" + (
                f"; {error}" if error else ""
            )
        return ProfileReport(
            name=name,
            enabled=profile.enabled,
            base_url=profile.base_url,
            model=profile.model,
            api_key=key.describe(),
            reachable=info.reachable if info else None,
            backend=info.kind if info else None,
            context_window=window,
            context_window_source=source,
            tokenizer=tokenizer.name,
            exact=tokenizer.exact,
            tokenizer_state=tokenizer.state,
            error=error,
        )

    return list(await asyncio.gather(*(report(name) for name in PROFILES)))


async def system_prompt_warnings(app: Any) -> list[str]:
    """For each enabled profile whose template exists: a warning when its required system
    prompt takes more than a quarter of the context window (or does not fit at all)."""
    from margin.core.budget import system_prompt_warning
    from margin.core.llm import ProviderError
    from margin.core.prompts import TemplateError

    warnings = []
    settings = app.settings.current
    for name in PROFILES:
        profile = settings.profile(name)
        if not profile.enabled:
            continue
        try:
            template = app.templates.load(profile.template)
        except TemplateError:
            continue  # reported when the profile is used
        window, counter = await app.window_and_counter(name)
        system = "\n\n".join(f.text for f in template.required)
        try:
            (tokens,) = await counter.count_texts([system])
        except ProviderError:  # an unreachable llama.cpp server is reported by status already
            continue
        if tokens > window - profile.max_output_tokens:
            warnings.append(f"Margin: the {name} profile's system prompt ({profile.template}) is {tokens} "
                            f"tokens, more than its {window}-token window leaves after "
                            f"{profile.max_output_tokens} reserved for the reply: requests will fail.")
        elif (warning := system_prompt_warning(tokens, window)) is not None:
            warnings.append(f"Margin ({name} profile, template {profile.template}): {warning}")
    return warnings
