"""The wire format of margin/status (see lsp/wire.py for the rest of Margin's own requests)."""

from __future__ import annotations

from margin.lsp.wire import _Wire


class StatusParams(_Wire):
    refresh: bool = False
    """Probe the backends again instead of reusing a recent probe."""


class FileStatusModel(_Wire):
    uri: str
    version: int
    """the editor's version of it"""
    fingerprint: str
    """sha256 of its text"""
    language_id: str
    """as the editor named it"""



class ProfileStatusModel(_Wire):
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



class StatusResult(_Wire):
    version: str
    """Margin's version"""
    position_encoding: str
    """utf-16, utf-8 or utf-32: the one agreed at `initialize`"""
    profiles: dict[str, ProfileStatusModel]
    """each profile by name"""
    files: list[FileStatusModel]
    """the open documents"""
    background: list[str]
    """work running after its request was answered, e.g. `summary <threadId>`"""
