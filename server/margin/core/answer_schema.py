"""The JSON schema of an answer as a model is shown it and held to it: pydantic's schema with
nothing a model could copy instead of an answer. Titles ("HoleAnswer", "Completion") are words
that say nothing a property name does not, and a small model answers with them
(`{"completion": "HoleAnswer"}`); `$defs` names ("ModelOp") are the same; a class's docstring is
a note for developers. So titles and class descriptions are dropped and references inlined; field
descriptions, types, enums and required lists stay. The same schema goes in the prompt and in
`response_format`, and validation is pydantic's own, on the same model."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel

NAMED = ("properties", "$defs", "patternProperties")
"""keywords whose value maps names (which stay, even a property called `title`) to schemas"""


def _plain(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_plain(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return _plain({**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs") or (key == "description" and "properties" in node):
            continue
        if key in NAMED:
            out[key] = {name: _plain(sub, defs) for name, sub in value.items()}
        else:
            out[key] = _plain(value, defs)
    return out


@functools.cache
def answer_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON schema with no titles, no class descriptions and no references (built once;
    callers only read it)."""
    schema = model.model_json_schema()
    plain: dict[str, Any] = _plain(schema, schema.get("$defs", {}))
    return plain
