"""Model servers on this machine, recognised from their answers (no I/O here: the answers are
fetched by margin.adapters.local_scan; `margin doctor` shows what is found).

Each server is recognised by an endpoint only it answers, as its own documentation describes:

    Ollama      GET /api/version → {"version"}, GET /api/tags → {"models": [{"name", ...}]}
                (docs.ollama.com/api-reference/get-version, docs.ollama.com/api/tags); its
                OpenAI-compatible API is under /v1: /v1/chat/completions, /v1/completions, whose
                documented request fields include `suffix` (fill-in-the-middle, for models whose
                template supports insertion; others answer 400 "does not support insert"), and
                /v1/models, whose `owned_by` is the Ollama user, "library" by default
                (docs.ollama.com/api/openai-compatibility)
    llama.cpp   GET /props → {"default_generation_settings": {"n_ctx"}, ...} (llama-server; a
                llamafile runs the same server)
    LM Studio   GET /api/v0/models → {"data": [{"id", "state", "max_context_length", ...}]}, its
                REST API beside the OpenAI-compatible /v1 (lmstudio.ai/docs/api)
    vLLM        GET /version → {"version"}, and `max_model_len` in each /v1/models entry
    any other   GET /v1/models → {"data": [{"id"}]} (OpenAI's list of models): an
                OpenAI-compatible server, named by the port it uses by default (Jan's 1337:
                jan.ai/docs/local-api; LocalAI's 8080), or answering 401/403 when it wants an API
                key (Jan always does)
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KnownPort:
    port: int
    servers: tuple[str, ...]
    """the servers that listen on this port unless told otherwise"""


DEFAULT_PORTS: tuple[KnownPort, ...] = (
    KnownPort(8080, ("llama.cpp", "llamafile", "LocalAI")),
    KnownPort(11434, ("Ollama",)),
    KnownPort(1234, ("LM Studio",)),
    KnownPort(8000, ("vLLM",)),
    KnownPort(1337, ("Jan",)),
)
"""Where local model servers listen by default: llama.cpp's llama-server, llamafile and LocalAI
on 8080, Ollama on 11434, LM Studio on 1234, vLLM on 8000 (`vllm serve`), Jan on 1337."""

LOOPBACK_HOSTS: tuple[str, ...] = ("127.0.0.1", "::1")
"""the only hosts searched: this machine, over IPv4 and IPv6"""

PORTS_ENV = "MARGIN_DOCTOR_PORTS"
"""the ports `margin doctor` searches instead of DEFAULT_PORTS (comma-separated)"""

MODELS_PATH = "/v1/models"
PATHS: tuple[str, ...] = (MODELS_PATH, "/api/version", "/api/tags", "/props", "/api/v0/models", "/version")
"""what is asked of each port that accepts a connection (GET, no body, no credentials)"""


@dataclass(frozen=True)
class Answer:
    """One GET's answer: its status and its body read as JSON (None when it is not JSON)."""

    status: int
    body: Any = None


@dataclass(frozen=True)
class FoundServer:
    """A model server answering on a loopback port, as its answers identify it."""

    host: str
    """127.0.0.1 or ::1"""
    port: int
    kind: str
    """Ollama, llama.cpp, LM Studio, vLLM, or `OpenAI-compatible`"""
    models: tuple[str, ...] = ()
    """the model ids its /v1/models lists (or Ollama's /api/tags), in its order"""
    version: str | None = None
    """its own version, where it says (Ollama's /api/version, vLLM's /version)"""
    needs_api_key: bool = False
    """its /v1/models answered 401 or 403"""
    default_of: tuple[str, ...] = ()
    """the servers whose default port this is"""

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "baseUrl": self.base_url, "host": self.host, "port": self.port,
                "version": self.version, "models": list(self.models), "needsApiKey": self.needs_api_key,
                "defaultPortOf": list(self.default_of)}


def parse_ports(text: str) -> tuple[int, ...]:
    """Ports given as `8080,11434` (spaces allowed); ValueError naming what is wrong."""
    ports = []
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        if not part.isdigit() or not 0 < int(part) < 65536:
            raise ValueError(f"not a port number: {part!r} (expected e.g. 8080,11434)")
        if int(part) not in ports:
            ports.append(int(part))
    if not ports:
        raise ValueError("no port given (expected e.g. 8080,11434)")
    return tuple(ports)


def default_of(port: int) -> tuple[str, ...]:
    return next((known.servers for known in DEFAULT_PORTS if known.port == port), ())


def _ok(answers: Mapping[str, Answer], path: str) -> dict[str, Any] | None:
    answer = answers.get(path)
    if answer is None or answer.status != 200 or not isinstance(answer.body, dict):
        return None
    return answer.body


def _names(entries: Any, key: str) -> tuple[str, ...]:
    if not isinstance(entries, list):
        return ()
    return tuple(str(e[key]) for e in entries if isinstance(e, dict) and isinstance(e.get(key), str) and e[key])


def _version(body: dict[str, Any] | None) -> str | None:
    value = (body or {}).get("version")
    return value if isinstance(value, str) and value else None


def identify(host: str, port: int, answers: Mapping[str, Answer]) -> FoundServer | None:
    """The model server that gave `answers` (GET path → answer) on host:port, or None when
    what answers there is not one (a web server that knows none of these endpoints)."""
    listed = _ok(answers, MODELS_PATH)
    entries = listed.get("data") if listed else None
    models = _names(entries, "id")
    defaults = default_of(port)

    def found(kind: str, names: tuple[str, ...] = models, version: str | None = None) -> FoundServer:
        return FoundServer(host, port, kind, names, version, default_of=defaults)

    ollama_version, tags = _version(_ok(answers, "/api/version")), _ok(answers, "/api/tags")
    if ollama_version is not None or (tags is not None and isinstance(tags.get("models"), list)):
        return found("Ollama", models or _names((tags or {}).get("models"), "name"), ollama_version)
    props = _ok(answers, "/props")
    if props is not None and ("default_generation_settings" in props or "n_ctx" in props):
        return found("llama.cpp")
    lm_studio = _ok(answers, "/api/v0/models")
    if lm_studio is not None and isinstance(lm_studio.get("data"), list):
        return found("LM Studio", models or _names(lm_studio["data"], "id"))
    vllm_version = _version(_ok(answers, "/version"))
    if vllm_version is not None or (isinstance(entries, list) and any(
            isinstance(e, dict) and "max_model_len" in e for e in entries)):
        return found("vLLM", version=vllm_version)
    if listed is not None and isinstance(entries, list):
        return found("OpenAI-compatible")
    if (answer := answers.get(MODELS_PATH)) is not None and answer.status in (401, 403):
        return FoundServer(host, port, "OpenAI-compatible", needs_api_key=True, default_of=defaults)
    return None


def dedupe(found: Iterable[FoundServer]) -> list[FoundServer]:
    """One entry per port (a server listening on both 127.0.0.1 and ::1 is one server, shown at
    127.0.0.1), in the order of the ports searched."""
    by_port: dict[int, FoundServer] = {}
    for server in found:
        if server.port not in by_port or server.host == LOOPBACK_HOSTS[0]:
            by_port[server.port] = server
    return list(by_port.values())


@dataclass(frozen=True)
class SettingLines:
    editor: tuple[str, ...]
    """VS Code's settings.json entries"""
    settings_file: str
    """the same as JSON for Margin's settings file or initializationOptions"""
    environment: tuple[str, ...]
    """MARGIN_ environment variables"""

    def as_dict(self) -> dict[str, object]:
        return {"editor": list(self.editor), "settingsFile": self.settings_file,
                "environment": list(self.environment)}


def settings_for(server: FoundServer, configured_models: Sequence[str | None]) -> SettingLines:
    """The settings that point every profile at `server`: its base URL, and a model it serves
    when the configured ones are not among them (Ollama, LM Studio and vLLM need a model name;
    the first listed is suggested)."""
    values: dict[str, str] = {"baseUrl": server.base_url}
    if server.models and not any(model in server.models for model in configured_models if model):
        values["model"] = server.models[0]
    env_names = {"baseUrl": "MARGIN_DEFAULTS_BASE_URL", "model": "MARGIN_DEFAULTS_MODEL"}
    return SettingLines(
        editor=tuple(f"{json.dumps('margin.defaults.' + key)}: {json.dumps(value)}" for key, value in values.items()),
        settings_file=json.dumps({"defaults": values}),
        environment=tuple(f"{env_names[key]}={value}" for key, value in values.items()),
    )


def describe(server: FoundServer) -> str:
    """e.g. `Ollama 0.12.6 at http://127.0.0.1:11434/v1, serving qwen2.5-coder:1.5b`"""
    name = server.kind + (f" {server.version}" if server.version else "")
    if server.kind == "OpenAI-compatible" and server.default_of:
        name += f" (port {server.port} is the default of {', '.join(server.default_of)})"
    text = f"{name} at {server.base_url}"
    if server.needs_api_key:
        return text + ", which wants an API key to list its models"
    if not server.models:
        return text + ", serving no model yet"
    shown = ", ".join(server.models[:5]) + (f" and {len(server.models) - 5} more" if len(server.models) > 5 else "")
    return text + f", serving {shown}"


Finder = Callable[[Sequence[int]], Awaitable[list[FoundServer]]]
"""ports → the model servers answering on them on this machine (margin.adapters.local_scan)"""
