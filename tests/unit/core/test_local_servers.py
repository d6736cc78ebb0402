"""Recognising a local model server from its answers, and the settings that point Margin at it."""

from __future__ import annotations

import json

import pytest

from margin.core.local_servers import Answer, FoundServer, dedupe, describe, identify, parse_ports, settings_for

NOT_FOUND = Answer(404, {"error": "404 page not found"})
OPENAI_LIST = Answer(200, {"object": "list", "data": [{"id": "m1", "object": "model", "owned_by": "me"}]})


def answers(**by_path: Answer) -> dict[str, Answer]:
    """Every probed path, 404 unless given (keys: v1_models, api_version, api_tags, props, api_v0_models, version)."""
    paths = {"v1_models": "/v1/models", "api_version": "/api/version", "api_tags": "/api/tags", "props": "/props",
             "api_v0_models": "/api/v0/models", "version": "/version"}
    return {path: by_path.get(key, NOT_FOUND) for key, path in paths.items()}


def test_ollama_is_recognised_by_its_version_and_tags_and_lists_its_models():
    found = identify("127.0.0.1", 11434, answers(
        v1_models=Answer(200, {"object": "list", "data": [{"id": "qwen2.5-coder:1.5b", "owned_by": "library"}]}),
        api_version=Answer(200, {"version": "0.12.6"}),
        api_tags=Answer(200, {"models": [{"name": "qwen2.5-coder:1.5b", "model": "qwen2.5-coder:1.5b"}]})))
    assert found == FoundServer("127.0.0.1", 11434, "Ollama", ("qwen2.5-coder:1.5b",), "0.12.6", default_of=("Ollama",))
    assert found.base_url == "http://127.0.0.1:11434/v1"


def test_ollama_without_the_openai_list_takes_its_models_from_tags():
    found = identify("127.0.0.1", 5000, answers(api_tags=Answer(200, {"models": [{"name": "llama3.2:1b"}]})))
    assert found is not None and (found.kind, found.models, found.version) == ("Ollama", ("llama3.2:1b",), None)


def test_llama_cpp_is_recognised_by_props():
    found = identify("127.0.0.1", 8080, answers(
        v1_models=Answer(200, {"data": [{"id": "gemma-3-270m.gguf", "owned_by": "llamacpp"}]}),
        props=Answer(200, {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1})))
    assert found is not None and (found.kind, found.models) == ("llama.cpp", ("gemma-3-270m.gguf",))
    assert found.default_of == ("llama.cpp", "llamafile", "LocalAI")


def test_lm_studio_is_recognised_by_its_rest_api():
    found = identify("127.0.0.1", 1234, answers(
        v1_models=Answer(200, {"data": [{"id": "qwen2.5-7b-instruct", "object": "model"}]}),
        api_v0_models=Answer(200, {"object": "list", "data": [
            {"id": "qwen2.5-7b-instruct", "type": "llm", "state": "loaded", "max_context_length": 32768}]})))
    assert found is not None and (found.kind, found.models) == ("LM Studio", ("qwen2.5-7b-instruct",))


def test_vllm_is_recognised_by_its_version_or_max_model_len():
    listed = Answer(200, {"data": [{"id": "Qwen/Qwen2.5-Coder-7B", "owned_by": "vllm", "max_model_len": 32768}]})
    by_version = identify("127.0.0.1", 8000, answers(v1_models=OPENAI_LIST, version=Answer(200, {"version": "0.11.0"})))
    by_models = identify("127.0.0.1", 8000, answers(v1_models=listed))
    assert by_version is not None and (by_version.kind, by_version.version) == ("vLLM", "0.11.0")
    assert by_models is not None and (by_models.kind, by_models.models) == ("vLLM", ("Qwen/Qwen2.5-Coder-7B",))


def test_another_openai_compatible_server_is_named_by_whose_default_port_it_is():
    found = identify("127.0.0.1", 1337, answers(v1_models=OPENAI_LIST))
    assert found is not None and (found.kind, found.models) == ("OpenAI-compatible", ("m1",))
    assert describe(found) == ("OpenAI-compatible (port 1337 is the default of Jan) at http://127.0.0.1:1337/v1, "
                               "serving m1")


def test_a_server_that_wants_a_key_is_found_and_says_so():
    found = identify("127.0.0.1", 1337, answers(v1_models=Answer(401, {"error": "Unauthorized"})))
    assert found is not None and found.needs_api_key and found.models == ()
    assert describe(found).endswith("which wants an API key to list its models")


@pytest.mark.parametrize("given", [
    answers(),                                                       # a web server that knows none of these
    answers(v1_models=Answer(200, "<html>hello</html>")),            # not JSON
    answers(v1_models=Answer(200, {"data": "x"}), props=Answer(200, {"status": "ok"})),
    answers(v1_models=Answer(302)),                                  # a redirect, not followed
])
def test_what_is_not_a_model_server_is_not_reported(given):
    assert identify("127.0.0.1", 8080, given) is None


def test_an_ipv6_server_has_a_bracketed_base_url_and_one_server_per_port_is_kept():
    v6 = FoundServer("::1", 11434, "Ollama")
    v4 = FoundServer("127.0.0.1", 11434, "Ollama")
    assert v6.base_url == "http://[::1]:11434/v1"
    assert dedupe([v6, FoundServer("::1", 8080, "llama.cpp"), v4]) == [v4, FoundServer("::1", 8080, "llama.cpp")]


def test_the_settings_lines_are_exact():
    server = FoundServer("127.0.0.1", 11434, "Ollama", ("qwen2.5-coder:1.5b", "llama3.2:1b"))
    lines = settings_for(server, [None, None])
    assert lines.editor == ('"margin.defaults.baseUrl": "http://127.0.0.1:11434/v1"',
                            '"margin.defaults.model": "qwen2.5-coder:1.5b"')
    assert lines.settings_file == '{"defaults": {"baseUrl": "http://127.0.0.1:11434/v1", "model": "qwen2.5-coder:1.5b"}}'
    assert lines.environment == ("MARGIN_DEFAULTS_BASE_URL=http://127.0.0.1:11434/v1",
                                 "MARGIN_DEFAULTS_MODEL=qwen2.5-coder:1.5b")


def test_a_configured_model_the_server_has_is_kept_and_one_without_models_gets_only_its_url():
    server = FoundServer("127.0.0.1", 11434, "Ollama", ("qwen2.5-coder:1.5b", "llama3.2:1b"))
    assert settings_for(server, ["llama3.2:1b", None]).environment == ("MARGIN_DEFAULTS_BASE_URL=http://127.0.0.1:11434/v1",)
    empty = FoundServer("127.0.0.1", 8080, "llama.cpp")
    assert settings_for(empty, [None]).editor == ('"margin.defaults.baseUrl": "http://127.0.0.1:8080/v1"',)


def test_ports_are_parsed_or_refused_with_the_reason():
    assert parse_ports("8080, 11434,8080") == (8080, 11434)
    for bad in ("", "http", "0", "70000", "80;81"):
        with pytest.raises(ValueError):
            parse_ports(bad)


def test_the_settings_lines_name_real_settings_of_the_editor_and_the_environment():
    from margin.core.settings_state import environment_source
    from tests.conftest import REPO

    server = FoundServer("127.0.0.1", 11434, "Ollama", ("qwen2.5-coder:1.5b",))
    lines = settings_for(server, [None])
    wanted = {"baseUrl": server.base_url, "model": "qwen2.5-coder:1.5b"}
    source = environment_source(dict(line.split("=", 1) for line in lines.environment))
    assert source.values == {"defaults": wanted}
    assert json.loads(lines.settings_file) == {"defaults": wanted}
    vscode = json.loads((REPO / "client-vscode" / "package.json").read_text())["contributes"]["configuration"]
    keys = {key for block in (vscode if isinstance(vscode, list) else [vscode]) for key in block["properties"]}
    editor = json.loads("{" + ", ".join(lines.editor) + "}")
    assert set(editor) <= keys and editor == {f"margin.defaults.{k}": v for k, v in wanted.items()}
