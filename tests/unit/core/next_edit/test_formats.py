"""Next-edit prompt formats pinned byte for byte against the references' own examples: Sweep's
`run_model.py` (the example in sweepai/sweep-next-edit-1.5B), and for Zeta the excerpt of Zed's
own test (crates/edit_prediction/src/zeta1.rs) and an event as Zeta's dataset and Zed's requests
carry it."""

from __future__ import annotations

import pytest

from margin.core.next_edit import formats
from margin.core.next_edit.formats import RecentEdit
from margin.core.next_edit.history import DocumentHistory

UTILS = '''def get_time_of_day():
    from datetime import datetime
    hour = datetime.now().hour
    if hour < 12:
        return "morning"
    elif hour < 18:
        return "afternoon"
    else:
        return "evening"
'''

SWEEP_RUN_MODEL = (
    '<|file_sep|>utils.py\n'
    'def get_time_of_day():\n'
    '    from datetime import datetime\n'
    '    hour = datetime.now().hour\n'
    '    if hour < 12:\n'
    '        return "morning"\n'
    '    elif hour < 18:\n'
    '        return "afternoon"\n'
    '    else:\n'
    '        return "evening"\n'
    '\n'
    '<|file_sep|>greet.py.diff\n'
    'original:\n'
    'def greet():\n'
    '    print("Hello!")\n'
    'updated:\n'
    'def greet(name):\n'
    '    print(f"Hello, {name}!")\n'
    '<|file_sep|>original/greet.py\n'
    'def greet(name):\n'
    '    print(f"Hello, {name}!")\n'
    '\n'
    'greet("Alice")\n'
    '<|file_sep|>current/greet.py\n'
    'from utils import get_time_of_day\n'
    '\n'
    'def greet(name):\n'
    '    print(f"Hello, {name}!")\n'
    '\n'
    'greet("Alice")\n'
    '<|file_sep|>updated/greet.py')
"""the prompt Sweep's run_model.py builds for its own example (its parts joined by line breaks:
a context file ending in a line break leaves an empty line; nothing after the open section)"""


def test_sweep_is_byte_for_byte_the_references_example():
    prompt = formats.sweep(
        [("utils.py", UTILS)],
        [RecentEdit("greet.py", 'def greet():\n    print("Hello!")', 'def greet(name):\n    print(f"Hello, {name}!")')],
        "greet.py",
        'def greet(name):\n    print(f"Hello, {name}!")\n\ngreet("Alice")',
        'from utils import get_time_of_day\n\ndef greet(name):\n    print(f"Hello, {name}!")\n\ngreet("Alice")')
    assert prompt == SWEEP_RUN_MODEL
    assert formats.SWEEP_STOP == ("<|file_sep|>", "</s>")


ZED_EXCERPT = (
    "```main.rs\n"
    "fn bar() {\n"
    "    let x = 42;\n"
    "    let mut sum = 0;\n"
    "    for i in 0..x {\n"
    "<|editable_region_start|>\n"
    "        sum += i;\n"
    "    }\n"
    '    println!("Sum: {}", sum);\n'
    "    r<|user_cursor_is_here|>eturn sum;\n"
    "}\n"
    "\n"
    "fn generate_random_numbers() -> Vec<i32> {\n"
    "<|editable_region_end|>\n"
    "    let mut rng = rand::thread_rng();\n"
    "```")
"""the excerpt of Zed's own zeta1 test"""
BUFFER = ("fn main() {\n    println!(\"{}\", bar());\n}\n\n"
          "fn bar() {\n    let x = 42;\n    let mut sum = 0;\n    for i in 0..x {\n        sum += i;\n    }\n"
          "    println!(\"Sum: {}\", sum);\n    return sum;\n}\n\nfn generate_random_numbers() -> Vec<i32> {\n"
          "    let mut rng = rand::thread_rng();\n    let mut numbers = Vec::new();\n}\n")

DATASET_EVENT = ('User edited "lua/ask-openai/prediction/tests/calc/calc.lua":\n```diff\n@@ -7,4 +7,5 @@\n \n \n \n+\n'
                 ' return M\n\n```')
"""an event as Zeta's dataset and Zed's requests carry it (an empty line added before `return M`)"""


def test_zeta_excerpt_is_zeds_own_example():
    low = BUFFER.index("fn bar()")
    start = BUFFER.index("        sum += i;")
    end = BUFFER.index("fn generate_random_numbers() -> Vec<i32> {") + len("fn generate_random_numbers() -> Vec<i32> {")
    high = BUFFER.index("    let mut rng = rand::thread_rng();") + len("    let mut rng = rand::thread_rng();")
    cursor = BUFFER.index("return sum;") + 1
    assert formats.zeta_excerpt("main.rs", BUFFER, (low, high), (start, end), cursor) == ZED_EXCERPT
    top = formats.zeta_excerpt("main.rs", BUFFER, (0, high), (0, end), 0)
    assert top.startswith("```main.rs\n<|start_of_file|>\n<|editable_region_start|>\n<|user_cursor_is_here|>fn main()")
    with pytest.raises(ValueError, match="cursor"):
        formats.zeta_excerpt("main.rs", BUFFER, (low, high), (start, end), 0)


def test_zeta_event_is_the_datasets_form_from_a_real_edit_history():
    before = "local M = {}\n\nfunction M.add(a, b)\n  return a + b\nend\n\n\n\n\nreturn M\n"
    history = DocumentHistory(before, 1)
    at = before.index("return M")
    history.changed(before[:at] + "\n" + before[at:], 2, 1.0)
    (edit,) = history.edits()
    recent = RecentEdit("lua/ask-openai/prediction/tests/calc/calc.lua", edit.old_lines, edit.new_lines, edit.line,
                        edit.context_before, edit.context_after)
    assert formats.zeta_event(recent) == DATASET_EVENT


def test_zeta_prompt_is_the_instruction_the_events_and_the_excerpt():
    edit = RecentEdit("a.py", "x = 1", "x = 2", 0, "", "")
    prompt = formats.zeta([edit, edit], "proj/a.py", "x = 2\n", (0, 6), (0, 5), 5)
    assert prompt == (
        "### Instruction:\nYou are a code completion assistant and your task is to analyze user edits and then "
        "rewrite an excerpt that the user provides, suggesting the appropriate edits within the excerpt, taking "
        "into account the cursor location.\n\n### User Edits:\n\n"
        'User edited "a.py":\n```diff\n@@ -1 +1 @@\n-x = 1\n+x = 2\n\n```\n\n'
        'User edited "a.py":\n```diff\n@@ -1 +1 @@\n-x = 1\n+x = 2\n\n```'
        "\n\n### User Excerpt:\n\n```proj/a.py\n<|start_of_file|>\n<|editable_region_start|>\nx = 2"
        "<|user_cursor_is_here|>\n<|editable_region_end|>\n\n```\n\n### Response:\n")


def test_a_text_holding_a_special_token_is_not_sent():
    assert formats.sweep([("a.py", "x <|file_sep|> y")], [], "b.py", "", "") is None
    assert formats.sweep([], [RecentEdit("b.py", "</s>", "")], "b.py", "", "") is None
    assert formats.zeta([], "a.py", "<|editable_region_end|>", (0, 0), (0, 0), 0) is None
    assert formats.sweep([], [], "b.py", "x", "y") is not None


def test_a_zeta_answer_is_read_as_its_editable_region_without_the_cursor():
    region = "def area(radius):\n    return math.pi * radius * radius"
    answer = (f"```geometry.py\n{formats.START_OF_FILE}\n{formats.REGION_START}\n"
              f"def area(radius):{formats.CURSOR}\n    return math.pi * radius * radius\n")
    assert formats.zeta_rewrite(answer) == region  # stopped at the end marker: the marker is not in the answer
    assert formats.zeta_rewrite(answer + f"{formats.REGION_END}\n```") == region  # or it is, and what follows goes
    assert formats.zeta_rewrite("def area(radius):\n") is None  # no region: no rewrite
    assert formats.zeta_rewrite(f"{formats.REGION_START}\n\n{formats.REGION_END}") == ""  # the region emptied


def test_zeta_hunk_headers_write_ranges_as_the_similar_crate_does():
    """Zed's diffs come from the `similar` crate (udiff.rs, UnifiedDiffHunkRange): one line is its
    number alone, an empty range names the line before it, any other length is written out."""
    one = RecentEdit("a.py", "x = 1", "x = 2", line=4)
    assert formats.zeta_hunk(one).startswith("@@ -5 +5 @@\n")
    added = RecentEdit("a.py", "a\nb", "a\nb\nc", line=0)
    assert formats.zeta_hunk(added) == "@@ -1,2 +1,3 @@\n a\n b\n+c\n"
    removed = RecentEdit("a.py", "a\nb", "a", line=0)
    assert formats.zeta_hunk(removed) == "@@ -1,2 +1 @@\n a\n-b\n"
