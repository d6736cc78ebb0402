"""A fake Ollama on loopback: the endpoints Margin meets, answered as Ollama documents them.

    with FakeOllama(["qwen2.5-coder:1.5b", "llama3.2:1b"], insert={"qwen2.5-coder:1.5b"}) as ollama:
        ollama.base_url   # http://127.0.0.1:<port>/v1
        ollama.posts      # (path, body) of every /v1/completions request

    GET  /api/version           {"version": "0.12.6"}          (docs.ollama.com/api-reference/get-version)
    GET  /api/tags              {"models": [{"name", "model", "modified_at", "size", "digest", "details"}]}
                                                               (docs.ollama.com/api/tags)
    GET  /v1/models             OpenAI's list; `owned_by` "library" (docs.ollama.com/api/openai-compatibility)
    POST /v1/chat/completions   FakeBackend's scripted replies (streamed when asked)
    POST /v1/completions        `prompt` and `suffix`: a text completion (streamed as SSE when asked);
                                `suffix` on a model whose template cannot insert: 400 `"<model>" does
                                not support insert` (Ollama's capability check); an unknown model: 404
    POST /api/show              {"parameters": "...", "model_info": {...}}: `num_ctx N` among the
                                parameters when the model's Modelfile pins its window (`num_ctx`);
                                an unknown model: 404 (docs.ollama.com/api-reference/show-model-details)
    GET  /api/ps                {"models": [{"name", "model", "context_length", ...}]}: the models
                                loaded (`load`), with the window each runs with
    GET  /props, /version, ...  404, as Ollama answers paths it does not have
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tests.fakes.fake_openai import FakeBackend, Step, raw, sse_lines, status

VERSION = "0.12.6"
CREATED = 1718000000


def _error(code: int, message: str, kind: str = "api_error") -> Step:
    return status(code, {"error": {"message": message, "type": kind, "param": None, "code": None}})


class FakeOllama(FakeBackend):
    def __init__(self, models: Sequence[str] = ("qwen2.5-coder:1.5b",), *, insert: set[str] | None = None,
                 completion: str = "return a + b", port: int = 0) -> None:
        super().__init__(models=[{"id": name, "object": "model", "created": CREATED, "owned_by": "library"}
                                 for name in models], port=port)
        self.names = list(models)
        self.insert = set(models) if insert is None else insert
        """the models whose template supports insertion (fill-in-the-middle with `suffix`)"""
        self.completion = completion
        self.get_json["/api/version"] = {"version": VERSION}
        self.get_json["/api/tags"] = {"models": [{
            "name": name, "model": name, "modified_at": "2025-10-03T23:34:03.409490317-07:00", "size": 986061892,
            "digest": f"{index:064x}", "details": {"format": "gguf", "family": name.split(":")[0], "families": None,
                                                   "parameter_size": "1.5B", "quantization_level": "Q4_K_M"}}
            for index, name in enumerate(models)]}
        self.answers["/v1/completions"] = self._complete
        self.num_ctx: dict[str, int] = {}
        """the models whose Modelfile sets `num_ctx`, and to what"""
        self.answers["/api/show"] = self._show
        self.load()

    def load(self, windows: dict[str, int] | None = None) -> None:
        """The models loaded now, each with the window it runs with."""
        self.get_json["/api/ps"] = {"models": [
            {"name": name, "model": name, "size": 1, "digest": "0" * 64, "expires_at": "2026-11-29T07:00:00Z",
             "size_vram": 0, "context_length": window} for name, window in (windows or {}).items()]}

    def _show(self, body: dict[str, Any]) -> Step:
        model = body.get("model") or body.get("name")
        if model not in self.names:
            return _error(404, f"model '{model}' not found")
        parameters = 'stop                           "<|im_end|>"'
        if model in self.num_ctx:
            parameters = f"num_ctx                        {self.num_ctx[model]}\n{parameters}"
        return raw(json.dumps({"modelfile": "FROM x", "parameters": parameters, "template": "{{ .Prompt }}",
                               "details": {"format": "gguf", "family": "qwen2"},
                               "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768}}))

    def _complete(self, body: dict[str, Any]) -> Step:
        model = body.get("model")
        if not model:
            return _error(400, "model is required", "invalid_request_error")
        if model not in self.names:
            return _error(404, f'model "{model}" not found, try pulling it first', "not_found_error")
        if not isinstance(body.get("prompt"), str):
            return _error(400, "invalid type for 'prompt' field", "invalid_request_error")
        if body.get("suffix") and model not in self.insert:
            return _error(400, f'"{model}" does not support insert')
        head = {"id": "cmpl-123", "object": "text_completion", "created": CREATED, "model": model,
                "system_fingerprint": "fp_ollama"}
        if not body.get("stream"):
            return raw(json.dumps({**head, "choices": [{"text": self.completion, "index": 0, "finish_reason": "stop"}],
                                   "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}))
        pieces = [self.completion[i:i + 4] for i in range(0, len(self.completion), 4)]
        chunks = [json.dumps({**head, "choices": [{"text": piece, "index": 0, "finish_reason": None}]})
                  for piece in pieces]
        chunks.append(json.dumps({**head, "choices": [{"text": "", "index": 0, "finish_reason": "stop"}]}))
        return sse_lines([*chunks, "[DONE]"])
