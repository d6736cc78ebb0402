"""The window Ollama serves a model with, which its OpenAI-compatible API neither says nor lets a
request set (it ignores `num_ctx` there), and past which it cuts the prompt without a word: a
prompt budgeted for the model's documented 128k reaches a 4k runner with its start gone.

Asked of Ollama's own API (docs.ollama.com): `POST /api/show` holds the model's `parameters`,
with `num_ctx N` when its Modelfile pins the window; `GET /api/ps` lists the loaded models with the
`context_length` each runs with (the server's OLLAMA_CONTEXT_LENGTH, or its default by the
machine's VRAM: 4k, 32k or 256k). When neither says, the smallest default, 4096, is taken: a
prompt that fits it fits any, and once the model is loaded the next probe reads the real one."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Any

import httpx

from margin.core.llm import BackendInfo

SMALLEST_DEFAULT = 4096
"""Ollama's default window on a machine with less than 24 GiB of VRAM (docs.ollama.com/context-length)"""
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def looks_like_ollama(models: Any) -> bool:
    """An OpenAI list of models as Ollama writes it: each entry `owned_by` its namespace,
    "library" for the models pulled from Ollama's own (docs.ollama.com/api/openai-compatibility)."""
    if not isinstance(models, httpx.Response) or models.status_code != 200:
        return False
    try:
        entries = models.json().get("data", [])
    except (ValueError, AttributeError):
        return False
    return any(isinstance(e, dict) and e.get("owned_by") == "library" for e in entries)


async def served_window(client: httpx.AsyncClient, root: str, model: str, timeout: float) -> tuple[int, str] | None:
    """The window Ollama runs `model` with, and how that is known; None when the server does not
    answer as Ollama does (not Ollama after all)."""
    show, ps = await asyncio.gather(client.post(f"{root}/api/show", json={"model": model}, timeout=timeout),
                                    client.get(f"{root}/api/ps", timeout=timeout), return_exceptions=True)
    if not isinstance(show, httpx.Response) or show.status_code != 200:
        return None
    try:
        parameters = show.json().get("parameters") or ""
    except (ValueError, AttributeError):
        return None
    pinned = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    if pinned:
        return int(pinned.group(1)), f"Ollama: num_ctx in {model}'s Modelfile"
    if isinstance(ps, httpx.Response) and ps.status_code == 200:
        try:
            loaded = [m for m in ps.json().get("models", []) if isinstance(m, dict)]
        except (ValueError, AttributeError):
            loaded = []
        for entry in loaded:
            length = entry.get("context_length")
            if model in (entry.get("name"), entry.get("model")) and isinstance(length, int) and length > 0:
                return length, f"Ollama: {model} is loaded with this window (/api/ps)"
    return SMALLEST_DEFAULT, (f"Ollama's smallest default: {model} is not loaded and its Modelfile sets no num_ctx "
                              "(give it more with OLLAMA_CONTEXT_LENGTH on the server)")


async def with_served_window(info: BackendInfo, client: httpx.AsyncClient, root: str, models: Any,
                             model: str | None, timeout: float) -> BackendInfo:
    """`info` with the window Ollama serves `model` with (the first it lists when none is named),
    when the backend is Ollama; it cuts a longer prompt silently (`silent_cut`)."""
    if not info.reachable or info.kind != "openai-compatible" or not looks_like_ollama(models):
        return info
    name = model or next(iter(info.models), None)
    found = await served_window(client, root, name, timeout) if name else None
    if found is None or name is None:
        return info
    window, source = found
    return dataclasses.replace(info, context_window=window, context_window_source=source,
                               model_windows=((name, window),), silent_cut=True)
