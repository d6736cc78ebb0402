"""What Margin loads after start-up rather than before it, in one place.

The language server must answer `initialize` within 1.2x a bare pygls server's time (SPEC,
"Performance"; benchmarks/bench_startup.py). Answering it takes the position encodings, the
handlers' registrations (the advertised capabilities and commands) and a pydantic-free pre-read
of the one setting they depend on (margin.core.settings_preread). Everything else — the settings
(pydantic: resolved right after the reply, before the next message), the services, the wire
models, convert, the adapters with httpx and aiosqlite, the tokenizers, the retrieval index — is
imported in a `with imports():` block:

    with deferred.imports():
        from margin.lsp import convert, wire

These are ordinary import statements to a type checker and a reader, but each name is bound to
a stand-in that imports its module on first use and then puts the module itself in the
importing module's namespace (later uses cost nothing). Only modules named in WARM_UP may be
imported so. `warm_up()` imports all of them in a background thread, started right after the
`initialize` reply, so the first real request finds them loaded rather than paying for them
itself.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import importlib
import logging
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
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
    "margin.adapters.disk_index_store",
    "margin.core.prompts",
    "margin.core.threads",
    "margin.core.tokens.choice",
    "margin.services.backends",
    "margin.services.completion_routes",
    "margin.services.probe_findings",
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
    "margin.lsp.wire_next_edit",
    "margin.core.next_edit.decide",
    "margin.services.next_edit",
    "margin.adapters.agent_run",
    "margin.core.editops",
    "margin.services.workspace",
    "margin.core.agent.tools",
    "margin.services.agent_turn",
    "margin.services.agent",
    "margin.lsp.wire_agent",
)
"""Imported in the background after `initialize`, in this order: every module imported in an
`imports()` block, and the libraries under them that cost most (tests check that each `module()` is
named here, and that none of these is loaded before the `initialize` reply)."""


class DeferredModule:
    """A module imported on first attribute access (thread-safe: the import system's locks).
    Once loaded, the module replaces this stand-in wherever the importing module bound it."""

    def __init__(self, name: str, importer: dict[str, Any] | None = None) -> None:
        self._name = name
        self._importer = importer

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self._name)
        importer, self._importer = self._importer, None
        if importer is not None:
            for key, value in list(importer.items()):
                if isinstance(value, DeferredModule) and value._name == self._name:
                    importer[key] = module
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<deferred module {self._name!r}>"


class _Names:
    """What `from package import a, b` reads its names from in an `imports()` block."""

    def __init__(self, names: Mapping[str, Any]) -> None:
        self.__dict__.update(names)


_state = threading.local()
_hooked = 0
_hook_lock = threading.Lock()
_original_import = builtins.__import__


def _stand_in(name: str, importer: dict[str, Any] | None) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    if name not in WARM_UP:
        raise ImportError(f"{name} is imported in deferred.imports() but not named in deferred.WARM_UP")
    return DeferredModule(name, importer)


def _import(name: str, globals: Mapping[str, Any] | None = None, locals: Mapping[str, Any] | None = None,
            fromlist: Sequence[str] | None = (), level: int = 0) -> Any:
    if not getattr(_state, "depth", 0):
        return _original_import(name, globals, locals, fromlist or (), level)
    if level != 0:
        raise ImportError(f"deferred.imports() takes absolute imports only, not a relative one of {name}")
    importer = globals if isinstance(globals, dict) else None
    if fromlist:
        return _Names({attribute: _stand_in(f"{name}.{attribute}", importer) for attribute in fromlist})
    if "." in name:
        raise ImportError(f"write `from {name.rpartition('.')[0]} import {name.rpartition('.')[2]}` "
                          f"in deferred.imports(), not `import {name}`")
    return _stand_in(name, importer)


@contextlib.contextmanager
def imports() -> Iterator[None]:
    """The imports in this block bind stand-ins that import their module on first use (see
    the module's docstring). Only this thread's imports are deferred while the block runs."""
    global _hooked
    with _hook_lock:
        if _hooked == 0:
            builtins.__import__ = _import
        _hooked += 1
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1
        with _hook_lock:
            _hooked -= 1
            if _hooked == 0:
                builtins.__import__ = _original_import


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
        # What start-up made stays for the process's life: out of the cyclic collector's view, a
        # full collection no longer walks it (here ~76,000 objects, 60 ms, a stall in the middle
        # of a request or a keystroke). Freed objects are still freed by their reference counts.
        gc.freeze()
        log.info("warm-up imports done ms=%.0f frozen=%d", (time.perf_counter() - started) * 1000,
                 gc.get_freeze_count())

    thread = threading.Thread(target=run, name="margin-warm-up", daemon=True)
    thread.start()
    return thread
