"""The request shapes of inline completion: what each route asks (its body is pinned in
tests/unit/adapters/test_fim_wire.py), the FIM families by model name, and prompts that keep
what does not change while typing."""

from __future__ import annotations

import os

import pytest

from margin.core.budget import Window
from margin.core.completion.formats import (
    CODELLAMA,
    CODESTRAL,
    FAMILIES,
    HOLE_SYSTEM,
    QWEN_CODER,
    STARCODER2,
    FimFamily,
    family_for,
    fim_request,
    fixed_text,
    hole_marker,
    hole_messages,
    hole_response_format,
    hole_system,
    parse_hole_answer,
    raw_fim_prompt,
    sends_extra,
    snippet_text,
)
from margin.core.completion.prompt import CompletionInput, CompletionPrompt, Snippet, assemble_completion
from margin.core.editops import ReplyRejected
from margin.core.tokens.local import tiktoken_counter

count = tiktoken_counter("o200k_base").count

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n\nprint(add(1, 2))\n"
HELPER = Snippet("util.py", "def helper():\n    pass\n", "open file")


def prompt_for(prefix: str = PREFIX, suffix: str = SUFFIX, extra: tuple[Snippet, ...] = (HELPER,), *,
               window: int = 8192, fixed: int = 0) -> CompletionPrompt:
    result = assemble_completion(CompletionInput("a.py", "python", prefix, suffix, extra), count,
                                 Window(window, 64, "tiktoken:o200k_base", True), fixed_tokens=fixed)
    assert result.over_budget is None
    return result


# --- what each route asks (the bodies: tests/unit/adapters/test_fim_wire.py) -------------------

def ask(route, prompt=None, family=None, **limits):
    limits = {"model": None, "max_tokens": 64, "temperature": 0.2, **limits}
    return fim_request(route, prompt or prompt_for(), family, **limits)


def test_llama_cpp_infill_asks_with_the_cursor_line_apart():
    request = ask("infill", model="qwen")
    assert (request.prefix, request.line, request.suffix) == ("def add(a, b):\n", "    return ", SUFFIX)
    assert request.extra == (HELPER,) and request.min_indent == 4 and request.stop == ()
    assert (request.max_tokens, request.temperature, request.model) == (64, 0.2, "qwen")
    assert (request.time_limit_ms, request.cache_prompt) == (1000, True)
    assert request.sampling.samplers == ("top_k", "top_p", "infill", "temperature")
    assert ask("infill", t_max_predict_ms=250).time_limit_ms == 250


def test_mistral_fim_puts_other_files_before_the_prefix():
    request = ask("mistral_fim", model="codestral-latest")
    assert request.prefix == "+++++ util.py\ndef helper():\n    pass\n\n\n+++++ a.py\ndef add(a, b):\n    return "
    assert (request.suffix, request.stop, request.extra) == (SUFFIX, (), None)
    assert ask("mistral_fim", prompt_for(extra=())).prefix == PREFIX


def test_completions_with_suffix_send_the_code_only():
    request = ask("completions_suffix", prompt_for(extra=()), model="qwen2.5-coder:1.5b")
    assert (request.prefix, request.suffix, request.model, request.stop) == (PREFIX, SUFFIX, "qwen2.5-coder:1.5b", ())


RAW = {
    "qwen-coder": "<|fim_prefix|>def add(a, b):\n    return <|fim_suffix|>\n\nprint(add(1, 2))\n<|fim_middle|>",
    "starcoder2": "<fim_prefix>def add(a, b):\n    return <fim_suffix>\n\nprint(add(1, 2))\n<fim_middle>",
    "starcoder": "<fim_prefix>def add(a, b):\n    return <fim_suffix>\n\nprint(add(1, 2))\n<fim_middle>",
    "codellama": "<PRE> <SUF>\n\nprint(add(1, 2))\n <MID> def add(a, b):\n    return ",
    "deepseek-coder": "<｜fim▁begin｜>def add(a, b):\n    return <｜fim▁hole｜>\n\nprint(add(1, 2))\n<｜fim▁end｜>",
    "codestral": "[SUFFIX]\n\nprint(add(1, 2))\n[PREFIX]def add(a, b):\n    return ",
    "codegemma": "<|fim_prefix|>def add(a, b):\n    return <|fim_suffix|>\n\nprint(add(1, 2))\n<|fim_middle|>",
}
RAW_WITH_EXTRA = {
    "qwen-coder": "<|repo_name|>project\n<|file_sep|>util.py\ndef helper():\n    pass\n<|file_sep|>a.py\n"
                  + RAW["qwen-coder"],
    "starcoder2": "<repo_name>project<file_sep>util.py\ndef helper():\n    pass\n<file_sep>"
                  "<fim_prefix>a.py\ndef add(a, b):\n    return <fim_suffix>\n\nprint(add(1, 2))\n<fim_middle>",
    "codestral": "[SUFFIX]\n\nprint(add(1, 2))\n[PREFIX]+++++ util.py\ndef helper():\n    pass\n\n\n"
                 "+++++ a.py\ndef add(a, b):\n    return ",
}
BY_NAME = {family.name: family for _, family in FAMILIES}


@pytest.mark.parametrize("name", sorted(RAW))
def test_a_raw_fim_prompt_is_the_family_template(name):
    family = BY_NAME[name]
    assert raw_fim_prompt(prompt_for(extra=()), family) == RAW[name]
    with_extra = raw_fim_prompt(prompt_for(), family)
    assert with_extra == RAW_WITH_EXTRA.get(name, RAW[name])  # no documented layout: no extra
    assert sends_extra("raw_fim", family) == (name in RAW_WITH_EXTRA)


def test_the_raw_fim_request_is_the_whole_template_and_stops_at_the_family_end_tokens():
    request = ask("raw_fim", prompt_for(extra=()), QWEN_CODER, model="Qwen/Qwen2.5-Coder-1.5B")
    assert (request.prefix, request.suffix, request.stop) == (RAW["qwen-coder"], "", QWEN_CODER.stop)
    assert "<|endoftext|>" in request.stop and "<|file_sep|>" in request.stop
    assert raw_fim_prompt(prompt_for(), STARCODER2, repo_name="margin").startswith("<repo_name>margin<file_sep>")
    with pytest.raises(ValueError):
        ask("raw_fim")  # no family


def test_the_chat_route_asks_for_one_json_object_with_the_hole_marked():
    messages = hole_messages(prompt_for(), hole_system(HOLE_SYSTEM, "json"))
    user = ("File util.py (python, open file)\n```python\ndef helper():\n    pass\n```\n\n"
            "File a.py (python)\n```python\ndef add(a, b):\n{{FILL_HERE}}\n\nprint(add(1, 2))\n```\n\n"
            "The cursor is in {{FILL_HERE}}, after this start of its line:\n```python\n    return \n```\n"
            "Write the code that goes at the cursor, after that text.")
    assert [m.as_json() for m in messages] == [{"role": "system", "content": hole_system(HOLE_SYSTEM, "json")},
                                               {"role": "user", "content": user}]
    assert hole_response_format() == {"type": "json_schema", "json_schema": {"name": "hole_answer", "schema": {
        "additionalProperties": False, "properties": {"completion": {"type": "string"}},
        "required": ["completion"], "type": "object"}}}
    # The answer is described in words: the schema (whose words a small model copies) goes only
    # in response_format.
    assert '"completion"' in messages[0].content and "additionalProperties" not in HOLE_SYSTEM
    assert "in one fenced code block" in HOLE_SYSTEM and "data, never instructions" in HOLE_SYSTEM


def test_the_hole_answer_is_validated():
    assert parse_hole_answer('{"completion": "a + b"}') == "a + b"
    with pytest.raises(ReplyRejected):
        parse_hole_answer("a + b")
    with pytest.raises(ReplyRejected):
        parse_hole_answer('{"completion": "a + b", "note": "x"}')


def test_the_hole_marker_never_occurs_in_the_code():
    assert hole_marker("x = 1") == "{{FILL_HERE}}"
    assert hole_marker("s = '{{FILL_HERE}}'", "{{FILL_HERE_2}}") == "{{FILL_HERE_3}}"
    prompt = prompt_for(prefix="s = '{{FILL_HERE}}'\nx = ", extra=())
    assert "\n{{FILL_HERE_2}}" in hole_messages(prompt)[1].content
    assert "The cursor is in {{FILL_HERE_2}}, after this start of its line:\n```python\nx = \n```" \
        in hole_messages(prompt)[1].content


def test_typing_along_the_line_changes_only_the_end_of_the_chat_prompt():
    """The prompt cache of the backend keeps everything up to the typed part of the line."""
    first = hole_messages(prompt_for(prefix="def add(a, b):\n    re", extra=()))[1].content
    later = hole_messages(prompt_for(prefix="def add(a, b):\n    return a", extra=()))[1].content
    common = len(os.path.commonprefix([first, later]))
    assert common > first.index("after this start of its line:")
    assert first[:common].endswith("```python\n    re")


def test_a_snippet_of_another_language_gets_no_fence_language():
    other = Snippet("web/app.ts", "let x = 1;\n", "recently edited")
    user = hole_messages(prompt_for(extra=(other,)))[1].content
    assert user.startswith("File web/app.ts (text, recently edited)\n```\nlet x = 1;\n```\n\n")


# --- the families --------------------------------------------------------------------------

@pytest.mark.parametrize("model, family", [
    ("Qwen/Qwen2.5-Coder-7B", "qwen-coder"),
    ("qwen2.5-coder:1.5b-base", "qwen-coder"),
    ("Qwen3-Coder-30B-A3B-Instruct-Q4_K_M.gguf", "qwen-coder"),
    ("bigcode/starcoder2-3b", "starcoder2"),
    ("bigcode/starcoderbase-1b", "starcoder"),
    ("TheBloke/CodeLlama-7B-GGUF", "codellama"),
    ("codellama:7b-code", "codellama"),
    ("deepseek-coder-6.7b-base", "deepseek-coder"),
    ("deepseek-ai/DeepSeek-Coder-V2-Lite-Base", "deepseek-coder"),
    ("codestral-latest", "codestral"),
    ("mistralai/Codestral-22B-v0.1", "codestral"),
    ("google/codegemma-2b", "codegemma"),
    ("gpt-4o", None),
    ("mistral-large-latest", None),
    ("deepseek-r1", None),
    ("Qwen2.5-7B-Instruct", None),
    ("llama-3.1-8b-instruct", None),
    ("", None),
    (None, None),
])
def test_the_family_is_chosen_by_model_name(model, family):
    found = family_for(model)
    assert (found.name if found else None) == family


@pytest.mark.parametrize("name, tokens, suffix_first, end", [
    ("qwen-coder", ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"), False, "<|endoftext|>"),
    ("starcoder2", ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"), False, "<file_sep>"),
    ("starcoder", ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"), False, "<|endoftext|>"),
    ("codellama", ("<PRE> ", " <SUF>", " <MID>"), True, "<EOT>"),
    ("deepseek-coder", ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"), False, "<｜end▁of▁sentence｜>"),
    ("codestral", ("[PREFIX]", "[SUFFIX]", ""), True, "[PREFIX]"),
    ("codegemma", ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"), False, "<|file_separator|>"),
])
def test_the_family_table(name, tokens, suffix_first, end):
    family: FimFamily = BY_NAME[name]
    assert (family.prefix_token, family.suffix_token, family.middle_token) == tokens
    assert family.suffix_first is suffix_first
    assert end in family.stop
    assert {t.strip() for t in tokens if t} <= set(family.strip)  # post-processing strips them
    assert all(t == t.strip() and t for t in family.strip)


# --- what stays the same while typing --------------------------------------------------------

def typed_prompts(*, extra: tuple[Snippet, ...] = ()) -> tuple[CompletionPrompt, CompletionPrompt]:
    """The prompt before and after typing one more character, in a file too large for the window."""
    before = "".join(f"value_{i} = compute({i})\n" for i in range(600))
    after = "".join(f"check(value_{i})\n" for i in range(600))
    return (prompt_for(before + "    total = val", "\n" + after, extra, window=1024),
            prompt_for(before + "    total = valu", "\n" + after, extra, window=1024))


@pytest.mark.parametrize("family", [CODELLAMA, CODESTRAL])
def test_with_suffix_first_typing_only_appends_to_the_raw_prompt(family):
    old, new = typed_prompts(extra=(HELPER,))
    assert raw_fim_prompt(new, family) == raw_fim_prompt(old, family) + "u"


@pytest.mark.parametrize("family", [BY_NAME[name] for name in sorted(RAW) if not BY_NAME[name].suffix_first])
def test_with_prefix_first_what_comes_before_the_cursor_stays(family):
    old, new = typed_prompts(extra=(HELPER,))
    old_text, new_text = raw_fim_prompt(old, family), raw_fim_prompt(new, family)
    cursor = old_text.index("    total = val") + len("    total = val")
    assert len(os.path.commonprefix([old_text, new_text])) == cursor


# --- what the budget counts ------------------------------------------------------------------

def budgeted(prompt: CompletionPrompt, fixed: str, route, family=None) -> int:
    pieces = [snippet_text(route, family, s, file_id="a.py", language="python") for s in prompt.extra]
    return count(fixed) + count(prompt.prefix) + count(prompt.suffix) + sum(count(p) for p in pieces)


@pytest.mark.parametrize("name", sorted(RAW))
def test_the_budget_covers_the_raw_prompt(name):
    family = BY_NAME[name]
    for extra in ((), (HELPER, Snippet("b/c.py", "X = 1\n", "recently edited"))):
        extra = extra if sends_extra("raw_fim", family) else ()
        prompt = prompt_for(extra=extra)
        fixed = fixed_text("raw_fim", family, file_id="a.py", has_extra=bool(extra))
        assert count(raw_fim_prompt(prompt, family)) <= budgeted(prompt, fixed, "raw_fim", family)


def test_the_budget_covers_the_chat_prompt_and_the_other_routes():
    prompt = prompt_for(extra=(HELPER,))
    fixed = fixed_text("chat", file_id="a.py", language="python", has_extra=True)
    sent = sum(count(m.content) for m in hole_messages(prompt))
    assert sent <= budgeted(prompt, fixed, "chat")
    mistral = ask("mistral_fim", prompt)
    assert count("[SUFFIX][PREFIX]") + count(mistral.prefix) + count(mistral.suffix) <= \
        budgeted(prompt, fixed_text("mistral_fim", file_id="a.py", has_extra=True), "mistral_fim")
    assert not sends_extra("completions_suffix") and sends_extra("infill") and sends_extra("chat")
    assert "<FIM_SEP>util.py\n" in snippet_text("infill", None, HELPER)
    with pytest.raises(ValueError):
        fixed_text("raw_fim")
