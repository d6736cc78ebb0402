"""The composition root: real adapters plugged into the services."""

from __future__ import annotations

import os
from typing import Mapping

from margin.adapters.llama_tokens import LlamaCppCounter
from margin.adapters.openai_http import OpenAICompatibleProvider, RequestObserver
from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.services.app import MarginApp


def make_provider(base_url: str, timeout_s: float, api_key: str | None,
                  on_request: RequestObserver | None = None) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(base_url, timeout_s=timeout_s, api_key=api_key, on_request=on_request)


def make_llama_counter(base_url: str, timeout_s: float) -> LlamaCppCounter:
    return LlamaCppCounter(base_url, timeout_s=timeout_s)


def build_app(environ: Mapping[str, str] | None = None) -> MarginApp:
    return MarginApp.create(make_provider, make_llama_counter, SQLiteThreadStore,
                            os.environ if environ is None else environ)
