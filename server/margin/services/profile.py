"""A request's profile, resolved once where the request enters: the settings it runs with, its
prompt template, the context window, the token counter and the backend. Everything a request
does — budgeting, counting, sending — reads this one snapshot, so a settings change while the
request runs cannot budget the prompt with one `maxOutputTokens` or model and send it with
another. The next request sees the new settings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from margin.core import pointers
from margin.core.llm import ChatMessage, ChatRequest, LLMProvider
from margin.core.prompts import PromptTemplate, TemplateError
from margin.core.settings import ProfileSettings
from margin.core.tokens.choice import choose_tokenizer
from margin.core.tokens.counter import TokenCounter
from margin.services.app import MarginApp
from margin.services.errors import RequestError


@dataclass(frozen=True)
class Profile:
    name: str
    settings: ProfileSettings
    template: PromptTemplate
    window: int
    counter: TokenCounter
    provider: LLMProvider
    tools: bool = False
    """the backend is thought to take tool calls: it says so, or does not say and has not refused
    them (Backends.takes_tools)"""

    @property
    def max_output_tokens(self) -> int:
        return self.settings.max_output_tokens

    @property
    def system(self) -> str:
        """The template's required fragments, joined: the system prompt that is never cut."""
        return "\n\n".join(f.text for f in self.template.required)

    @property
    def optional_system(self) -> list[tuple[str, str]]:
        """(name, text) of the template's optional fragments."""
        return [(f.name, f.text) for f in self.template.optional]

    def pointer_legend(self, recall: str) -> str:
        """What pointers mean (the template's `[pointers]` fragment, else the code's) and
        `recall`: how to see their content again."""
        return f"{self.template.pointer_legend or pointers.LEGEND} {recall}"

    def request(self, messages: Sequence[ChatMessage], response_format: dict[str, Any] | None = None,
                tools: Sequence[dict[str, Any]] = (), tool_choice: Literal["auto", "none"] | None = None) -> ChatRequest:
        """A request to this profile's model, with this profile's limits."""
        s = self.settings
        return ChatRequest(messages, s.max_output_tokens, s.temperature, s.model, response_format, tools,
                           tool_choice if tools else None)


def snapshot(app: MarginApp, name: str) -> ProfileSettings:
    """The profile's settings as they are now: take this once, at the request's entry."""
    return app.settings.current.profile(name)


async def resolve_profile(app: MarginApp, name: str, settings: ProfileSettings | None = None) -> Profile:
    """`settings` (by default, the profile's settings now) with their template, window, counter
    and backend. The backend is probed, or a recent probe reused."""
    settings = settings if settings is not None else snapshot(app, name)
    try:
        template = app.templates.load(settings.template)
    except TemplateError as error:
        raise RequestError(str(error)) from None
    info = await app.backends.probe(name, settings)
    window, _ = app.backends.context_window(settings, info)
    choice = choose_tokenizer(settings.tokenizer, settings.model, info.kind)
    counter = await app.tokenizers.counter(choice, settings.base_url, settings.timeout_s,
                                           app.backends.key_for(settings))
    return Profile(name, settings, template, window, counter, app.backends.provider(name, settings),
                   app.backends.takes_tools(settings, info))
