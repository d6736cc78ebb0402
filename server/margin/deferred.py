"""What Margin loads after start-up rather than before it, in one place.

The language server must answer `initialize` within 1.2x a bare pygls server's time (SPEC,
"Performance"; benchmarks/bench_startup.py). Answering it takes the position encodings, the
handlers' registrations (the advertised capabilities and commands) and a pydantic-free pre-read
of the one setting they depend on (margin.core.settings_preread). Everything else — the settings
(pydantic: resolved right after the reply, before the next message), the services, the wire
models, convert, the adapters with httpx and aiosqlite, the tokenizers, the retrieval index — is
named here with `module(name)`: a stand-in bound at module level that imports the module on
first use. `warm_up()` imports all of them in a
background thread, started right after the `initialize` reply, so the first real request finds
them loaded rather than paying for them itself.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

WARM_UP: tuple[str, ...] = (
    "pydantic",
    "margin.core.settings",
    "margin.core.settings_state",
    "margin.services.settings_file",
    "httpx",
    "aiosqlite",
    "urllib.request",
    "margin.adapters.openai_http",
    "margin.adapters.llama_tokens",
    "margin.adapters.sqlite_store",
    "margin.adapters.local_files",
    "margin.adapters.git_cli",
    "margin.adapters.index_file",
    "margin.core.prompts",
    "margin.core.threads",
    "margin.core.tokens.choice",
    "margin.services.backends",
    "margin.services.completion_routes",
    "margin.services.thread_storage",
    "margin.services.tokenizers",
    "margin.services.completion",
    "margin.services.diagnosis",
    "margin.services.registry",
    "margin.lsp.convert",
    "margin.lsp.wire",
    "margin.lsp.wire_completion",
    "margin.lsp.wire_edits",
    "margin.lsp.wire_memories",
    "margin.lsp.wire_status",
)
"""Imported in the background after `initialize`, in this order: every module bound with
`module()`, and the libraries under them that cost most (tests check that each `module()` is
named here, and that none of these is loaded before the `initialize` reply)."""


class DeferredModule:
    """A module imported on first attribute access (thread-safe: the import system's locks)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<deferred module {self._name!r}>"


def module(name: str) -> Any:
    """`name`, imported when first used (see WARM_UP, which should name it)."""
    return DeferredModule(name)


def warm_up() -> threading.Thread:
    """Import WARM_UP in a daemon thread; a module that fails is logged and skipped (its first
    real use raises the error where it can be reported)."""

    def run() -> None:
        started = time.perf_counter()
        for name in WARM_UP:
            try:
                importlib.import_module(name)
            except Exception as error:  # noqa: BLE001 - an optional library missing, a bug: seen on first use
                log.warning("warm-up import failed module=%s error=%s", name, type(error).__name__)
        log.info("warm-up imports done ms=%.0f", (time.perf_counter() - started) * 1000)

    thread = threading.Thread(target=run, name="margin-warm-up", daemon=True)
    thread.start()
    return thread
