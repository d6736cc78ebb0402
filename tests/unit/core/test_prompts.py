from __future__ import annotations

import pytest

from margin.core.prompts import DATA_GUARD, TemplateError, Templates, parse_template, shipped_prompts_dir


def test_shipped_chat_template_has_the_guard_from_code():
    template = Templates().load("chat_v1")
    assert template.path.parent == shipped_prompts_dir()
    required = "\n\n".join(f.text for f in template.required)
    assert DATA_GUARD in required and "{{" not in required
    assert [f.name for f in template.optional] == ["style"]


def test_user_folder_comes_first_and_changes_are_picked_up(tmp_path):
    (tmp_path / "chat_v1.md").write_text("[required]\nMine.\n")
    templates = Templates(user_dir=tmp_path)
    assert templates.load("chat_v1").fragments[0].text == "Mine."
    (tmp_path / "chat_v1.md").write_text("[required]\nMine, changed.\n")
    import os
    os.utime(tmp_path / "chat_v1.md", (1, 1))
    assert templates.load("chat_v1").fragments[0].text == "Mine, changed."


@pytest.mark.parametrize("text,problem", [
    ("[required]\nHi {{nope}}\n", "unknown fragment {{nope}}"),
    ("[optional]\nx\n", "needs a name"),
    ("[optional: a]\nx\n", "no [required] fragment"),
    ("stray\n[required]\nx\n", "text before the first"),
    ("[required]\nx\n[request: a]\ny\n", "[request] takes no name"),
    ("[required]\nx\n[optional: request]\ny\n", "'request' is the name of the [request] fragment"),
])
def test_malformed_templates_are_named(tmp_path, text, problem):
    with pytest.raises(TemplateError) as caught:
        parse_template("t", tmp_path / "t.md", text)
    assert problem in str(caught.value) and "t.md" in str(caught.value)


def test_missing_template_names_where_it_looked(tmp_path):
    with pytest.raises(TemplateError, match="no prompt template 'chat_v9'"):
        Templates(user_dir=tmp_path).load("chat_v9")


def test_request_fragments_go_with_the_request_not_in_the_system_prompt(tmp_path):
    template = parse_template("t", tmp_path / "t.md", "[required]\nSys.\n[request]\nAsk {{data_guard}}\n"
                                                      "[optional: a]\nOpt.\n[request]\nMore.\n")
    assert [f.text for f in template.required] == ["Sys."]
    assert [f.name for f in template.optional] == ["a"]
    assert template.request == f"Ask {DATA_GUARD}\n\nMore."
    assert parse_template("t", tmp_path / "t.md", "[required]\nSys.\n").request == ""


def test_chat_and_edit_ops_templates_share_their_system_prompt_word_for_word():
    """They share a thread: a prompt of either starts as the other's did, so the backend's
    prompt cache holds across them. What edit-ops need goes with the request."""
    chat, ops = Templates().load("chat_v1"), Templates().load("chat_ops_v1")
    system = [(f.name, f.text) for f in chat.fragments if f.name != "request"]
    assert [(f.name, f.text) for f in ops.fragments if f.name != "request"] == system
    assert chat.request == "" and "assistant_message" in ops.request and "`match`" in ops.request
