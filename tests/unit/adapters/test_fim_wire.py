"""Each fill-in-the-middle route's exact body for what core asks (core.completion.formats
.fim_request), and its answer read as a reply."""

from __future__ import annotations

from dataclasses import replace

from margin.adapters.fim_wire import WIRES, completions_body, completions_reply, infill_body, infill_reply
from margin.core.completion.formats import QWEN_CODER, fim_request
from margin.core.fim import FimReply
from margin.core.llm import Usage
from margin.services.completion_routes import INFILL_PROBE
from tests.unit.core.completion.test_formats import HELPER, PREFIX, RAW, SUFFIX, prompt_for, typed_prompts


def ask(route, prompt=None, family=None, **limits):
    limits = {"model": None, "max_tokens": 64, "temperature": 0.2, **limits}
    return fim_request(route, prompt or prompt_for(), family, **limits)


def test_llama_cpp_infill_sends_the_cursor_line_as_prompt():
    assert infill_body(ask("infill")) == {
        "input_prefix": "def add(a, b):\n",
        "input_suffix": "\n\nprint(add(1, 2))\n",
        "input_extra": [{"filename": "util.py", "text": "def helper():\n    pass\n"}],
        "prompt": "    return ",
        "n_predict": 64,
        "n_indent": 4,
        "t_max_predict_ms": 1000,
        "temperature": 0.2,
        "top_k": 40,
        "top_p": 0.9,
        "samplers": ["top_k", "top_p", "infill", "temperature"],
        "cache_prompt": True,
        "stream": True,
    }
    routed = infill_body(ask("infill", prompt_for(extra=()), max_tokens=32, temperature=0.0, model="qwen",
                             t_max_predict_ms=250))
    assert (routed["model"], routed["input_extra"], routed["t_max_predict_ms"]) == ("qwen", [], 250)
    assert list(routed)[-2:] == ["stream", "model"]


def test_the_infill_route_probe_asks_for_one_token_and_keeps_nothing():
    assert infill_body(INFILL_PROBE) == {"input_prefix": "", "input_suffix": "", "prompt": "", "n_predict": 1,
                                         "cache_prompt": False, "stream": True}


def test_llama_cpp_infill_changes_only_its_prompt_while_typing():
    old, new = typed_prompts(extra=(HELPER,))
    old_body, new_body = (infill_body(ask("infill", p)) for p in (old, new))
    assert {k for k in old_body if old_body[k] != new_body[k]} == {"prompt"}
    assert (old_body["prompt"], new_body["prompt"]) == ("    total = val", "    total = valu")


def test_mistral_fim_puts_other_files_before_the_prefix():
    assert completions_body(ask("mistral_fim", model="codestral-latest")) == {
        "model": "codestral-latest",
        "prompt": "+++++ util.py\ndef helper():\n    pass\n\n\n+++++ a.py\ndef add(a, b):\n    return ",
        "suffix": "\n\nprint(add(1, 2))\n",
        "max_tokens": 64,
        "temperature": 0.2,
        "stream": True,
    }
    stopped = replace(ask("mistral_fim", prompt_for(extra=()), model="codestral-2501", max_tokens=16,
                          temperature=0.0), stop=("\n\n",))
    assert completions_body(stopped) == {
        "model": "codestral-2501", "prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 16, "temperature": 0.0,
        "stop": ["\n\n"], "stream": True,
    }


def test_completions_with_suffix_send_the_code_only():
    assert completions_body(ask("completions_suffix", prompt_for(extra=()), model="qwen2.5-coder:1.5b")) == {
        "model": "qwen2.5-coder:1.5b", "prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 64,
        "temperature": 0.2, "stream": True,
    }
    assert completions_body(ask("completions_suffix"))["model"] == ""  # no model set: sent empty


def test_the_raw_fim_body_sends_no_suffix_and_stops_at_the_family_end_tokens():
    assert completions_body(ask("raw_fim", prompt_for(extra=()), QWEN_CODER, model="Qwen/Qwen2.5-Coder-1.5B")) == {
        "model": "Qwen/Qwen2.5-Coder-1.5B",
        "prompt": RAW["qwen-coder"],
        "max_tokens": 64,
        "temperature": 0.2,
        "stop": ["<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>",
                 "<|repo_name|>", "<|file_sep|>", "<|im_start|>", "<|im_end|>"],
        "stream": True,
    }


def test_each_route_goes_to_its_endpoint():
    assert {route: (wire.path, wire.at_root) for route, wire in WIRES.items()} == {
        "infill": ("/infill", True), "mistral_fim": ("/fim/completions", False),
        "completions_suffix": ("/completions", False), "raw_fim": ("/completions", False)}


def test_answers_read_as_replies():
    assert infill_reply({"content": "a + b", "stop": True, "stop_type": "limit", "tokens_evaluated": 40,
                         "tokens_predicted": 5}) == FimReply("a + b", "length", Usage(40, 5))
    assert infill_reply({"content": None}) == FimReply("")
    assert completions_reply({"choices": [{"text": "a", "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 9, "completion_tokens": 1}}) == FimReply("a", "stop", Usage(9, 1))
    assert completions_reply({"choices": [{"message": {"content": "b"}}]}) == FimReply("b")
    assert completions_reply({}) == FimReply("")
