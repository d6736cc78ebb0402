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
])
def test_malformed_templates_are_named(tmp_path, text, problem):
    with pytest.raises(TemplateError) as caught:
        parse_template("t", tmp_path / "t.md", text)
    assert problem in str(caught.value) and "t.md" in str(caught.value)


def test_missing_template_names_where_it_looked(tmp_path):
    with pytest.raises(TemplateError, match="no prompt template 'chat_v9'"):
        Templates(user_dir=tmp_path).load("chat_v9")
