"""The token counters the profiles count with. Local tokenizers (tiktoken, Tekken) take about a
second to build, so they are built in a worker thread as soon as settings name them, never on
the path of `initialize`; a request that needs one before it is ready waits for that build only.
A tokenizer whose asset is missing or fails its hash check is replaced by the heuristic, with
one warning (metadata only), and everything that reports on it says `exact: false`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from margin.core.tokens.assets import AssetError
from margin.core.tokens.choice import TokenizerChoice
from margin.core.tokens.counter import CountCache, LocalCounter, TokenCounter, heuristic_counter
from margin.core.tokens.local import tekken_counter, tiktoken_counter

log = logging.getLogger(__name__)

REMOTE = ("llama.cpp", "vllm")
"""tokenizer kinds that ask the model server"""

ServerCounterFactory = Callable[[TokenizerChoice, str, float, "str | None"], TokenCounter]
"""(choice, base_url, timeout_s, api_key) → a counter asking the model server there (llama.cpp or
vLLM), with the profile's key when it sends one"""


@dataclass(frozen=True)
class TokenizerState:
    """What a profile really counts with right now."""

    name: str
    exact: bool
    state: str
    """ready | loading | remote | unavailable: <reason> (counting with the heuristic)"""


def build_local(choice: TokenizerChoice) -> LocalCounter:
    if choice.kind == "tiktoken":
        return tiktoken_counter(choice.variant or "o200k_base")
    if choice.kind == "tekken":
        return tekken_counter(choice.variant or "tekken_240911", choice.framing or "v7")  # type: ignore[arg-type]
    raise ValueError(f"{choice.name} is not an in-process tokenizer")


class Tokenizers:
    def __init__(self, make_server_counter: ServerCounterFactory) -> None:
        self._make_server_counter = make_server_counter
        self._loads: dict[str, asyncio.Future[LocalCounter | None]] = {}
        self._failures: dict[str, str] = {}
        self._remote: dict[tuple[str, str, str | None], TokenCounter] = {}
        self._heuristic = heuristic_counter(CountCache())

    def preload(self, choices: Iterable[TokenizerChoice]) -> None:
        """Start building every in-process tokenizer in `choices` that is not built or being
        built. Returns at once."""
        for choice in choices:
            if choice.kind in ("tiktoken", "tekken") and choice.name not in self._loads:
                self._loads[choice.name] = asyncio.ensure_future(self._build(choice))

    async def _build(self, choice: TokenizerChoice) -> LocalCounter | None:
        """The built counter, or None when its asset cannot be had."""
        started = time.perf_counter()
        try:
            counter = await asyncio.to_thread(build_local, choice)
        except AssetError as error:
            self._failures[choice.name] = str(error)
            log.warning("tokenizer %s unavailable (%s); counting approximately with the heuristic",
                        choice.name, error)
            return None
        log.info("tokenizer %s ready ms=%.0f", choice.name, (time.perf_counter() - started) * 1000)
        return counter

    async def counter(self, choice: TokenizerChoice, base_url: str, timeout_s: float,
                      api_key: str | None = None) -> TokenCounter:
        """The counter for `choice`: built (waiting for its build if need be), remote, or the
        heuristic when the choice cannot be had."""
        if choice.kind in REMOTE:
            key = (choice.name, base_url, api_key)
            if key not in self._remote:
                self._remote[key] = self._make_server_counter(choice, base_url, timeout_s, api_key)
            return self._remote[key]
        if choice.kind == "heuristic":
            return self._heuristic
        self.preload([choice])
        built = await asyncio.shield(self._loads[choice.name])
        return built if built is not None else self._heuristic

    def state(self, choice: TokenizerChoice) -> TokenizerState:
        if choice.kind == "heuristic":
            return TokenizerState("heuristic", False, "ready")
        if choice.kind in REMOTE:
            asked = [c for (name, _, _), c in self._remote.items() if name == choice.name]
            refused = next(filter(None, (getattr(c, "unavailable", None) for c in asked)), None)
            if refused:  # the server said it does not count
                return TokenizerState("heuristic", False, f"unavailable: {refused} (counting with the token bound)")
            return TokenizerState(choice.name, True, "remote")
        if choice.name in self._failures:
            return TokenizerState("heuristic", False, f"unavailable: {self._failures[choice.name]}")
        load = self._loads.get(choice.name)
        if load is not None and load.done() and not load.cancelled() and load.result() is not None:
            return TokenizerState(choice.name, True, "ready")
        return TokenizerState(choice.name, True, "loading")

    async def aclose(self) -> None:
        for load in self._loads.values():
            load.cancel()
        for remote in self._remote.values():
            close = getattr(remote, "aclose", None)
            if close is not None:
                await close()
