"""No prompt shows a model a name it could copy instead of an answer: the schemas in prompts and
in `response_format` carry no titles, no `$defs` names and no class notes (a small model answered
`{"completion": "HoleAnswer"}` when they did)."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from margin.core.answer_schema import answer_schema
from margin.core.completion import formats
from margin.core.editops import ModelOp, ModelReply, reply_json_schema
from margin.core.prompts import Templates
from margin.core.selection_edit import SelectionReply, selection_reply_schema

ANSWERS = (formats.HoleAnswer, ModelReply, ModelOp, SelectionReply)
NAMES = [model.__name__ for model in ANSWERS]


def keywords(node, found=None):
    """Every schema keyword used anywhere in `node` (names under `properties` are not keywords)."""
    found = set() if found is None else found
    if isinstance(node, list):
        for item in node:
            keywords(item, found)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "properties":
                for sub in value.values():
                    keywords(sub, found)
            else:
                found.add(key)
                keywords(value, found)
    return found


@pytest.mark.parametrize("schema", [answer_schema(formats.HoleAnswer), reply_json_schema(),
                                    selection_reply_schema(), formats.hole_response_format()["json_schema"]["schema"]])
def test_a_schema_a_model_sees_has_no_titles_refs_or_class_names(schema):
    assert keywords(schema) & {"title", "$ref", "$defs"} == set()
    text = json.dumps(schema)
    assert [name for name in NAMES if name in text] == []


@pytest.mark.parametrize("template_id", ["completion_v1", "chat_ops_v1", "edit_v1", "chat_v1", "summary_v1"])
def test_no_shipped_prompt_shows_a_title_or_an_answer_class_name(template_id):
    template = Templates().load(template_id)
    text = "\n".join(fragment.text for fragment in template.fragments)
    assert '"title"' not in text and "$defs" not in text
    assert [name for name in NAMES if name in text] == []


def test_a_property_called_title_is_kept_and_the_schema_still_validates_like_the_model():
    class Note(BaseModel):
        """Developer note that no model should read."""
        model_config = ConfigDict(extra="forbid")
        title: str
        tags: list[str]

    schema = answer_schema(Note)
    assert schema == {"additionalProperties": False, "type": "object", "required": ["title", "tags"],
                      "properties": {"title": {"type": "string"}, "tags": {"items": {"type": "string"}, "type": "array"}}}
    with pytest.raises(ValidationError):
        Note.model_validate_json('{"title": "x"}')


def test_ops_are_inlined_with_their_enums():
    ops = reply_json_schema()["properties"]["ops"]["items"]
    assert ops["properties"]["op"]["enum"] == ["insert", "replace", "delete"]
    assert ops["required"] == ["op", "target_file", "target"]
