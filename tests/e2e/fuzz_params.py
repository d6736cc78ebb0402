"""Schema-driven fuzzing of the params Margin takes (used by tests/e2e/test_fuzz_params.py): JSON
schemas — pydantic's for Margin's own models, one derived from lsprotocol's attrs classes for the
standard requests — turned into hypothesis strategies of valid params and of near-valid and
hostile variants; what each model says of a params object (accepted, or the fields it names);
and a client-side mirror of the open documents that applies the same changes at UTF-16
positions, written apart from the server's own code."""

from __future__ import annotations

import collections.abc
import enum
import hashlib
import json
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import attrs
import cattrs
from cattrs.v import transform_error
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from lsprotocol import types, validators
from pydantic import BaseModel, ValidationError
from pygls.protocol import default_converter

Hints = dict[str, st.SearchStrategy[Any]]
"""Strategies for named fields, by `Definition.key` or `*.key` (e.g. `*.uri`)."""

# --- schemas ---------------------------------------------------------------------------------


def _camel(name: str) -> str:
    parts = name.removesuffix("_").split("_")
    return parts[0] + "".join(p.title() for p in parts[1:])


def lsp_schema(cls: type) -> dict[str, Any]:
    """A JSON schema of an lsprotocol class as it travels (camelCase keys, LSP integer ranges)."""
    defs: dict[str, Any] = {}
    return {**_lsp_type(cls, defs), "$defs": defs}


def _lsp_type(tp: Any, defs: dict[str, Any], validator: Any = None) -> dict[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is typing.Any or tp is object or isinstance(tp, (str, typing.ForwardRef)):
        return {}
    if origin is typing.Union:
        return {"anyOf": [_lsp_type(a, defs, validator) for a in args]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence):
        return {"type": "array", "items": _lsp_type(args[0], defs) if args else {}}
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        return {"type": "object", "additionalProperties": _lsp_type(args[1], defs)}
    if attrs.has(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}
            attrs.resolve_types(tp)
            fields = attrs.fields(tp)
            defs[name] = {
                "type": "object",
                "properties": {_camel(a.name): _lsp_type(a.type, defs, a.validator) for a in fields},
                "required": [_camel(a.name) for a in fields if a.default is attrs.NOTHING],
            }
        return {"$ref": f"#/$defs/{name}"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [member.value for member in tp]}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        if validator is validators.uinteger_validator:
            return {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
        if validator is validators.integer_validator:
            return {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if tp is type(None):
        return {"type": "null"}
    return {}


def pydantic_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True)


def optional_everywhere(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with no required fields (settings come in partial layers)."""
    if isinstance(schema, dict):
        return {k: optional_everywhere(v) for k, v in schema.items() if k != "required"}
    if isinstance(schema, list):
        return [optional_everywhere(v) for v in schema]
    return schema


# --- valid values from a schema --------------------------------------------------------------

JSON_LEAVES = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6)
JSON_VALUES = st.recursive(JSON_LEAVES, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
TEXT = st.text(alphabet=st.sampled_from("ab x_\n\r\t😀é{}\"\\"), max_size=12)


def from_schema(schema: dict[str, Any], root: dict[str, Any], hints: Hints, where: str = "",
                key: str = "") -> st.SearchStrategy[Any]:
    """Values the schema accepts (mostly: hints may stray), small, with hints for named fields."""
    for name in (f"{where}.{key}", f"*.{key}"):
        if key and name in hints:
            return hints[name]
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: from_schema(root["$defs"][name], root, hints, name))
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return st.one_of([from_schema(s, root, hints, where, key) for s in schema[union]])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return from_schema(schema["allOf"][0], root, hints, where, key)
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, root, hints, where, key) for k in kind])
    if kind == "string":
        low = schema.get("minLength", 0)
        high = max(low, min(schema.get("maxLength", low + 12), low + 12))
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(lambda s: len(s) < 40)
        return st.text(min_size=low, max_size=high)
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -11) + 1)
        high = schema.get("maximum", schema.get("exclusiveMaximum", low + 21) - 1)
        return st.integers(low, min(high, low + 20)) | st.integers(low, high)
    if kind == "number":
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        return st.floats(low, high, allow_nan=False, allow_infinity=False,
                         exclude_min="exclusiveMinimum" in schema, exclude_max="exclusiveMaximum" in schema)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {}), root, hints, where, key),
                        min_size=schema.get("minItems", 0), max_size=max(schema.get("minItems", 0), 3))
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        strategies = {k: from_schema(s, root, hints, where, k) for k, s in properties.items()}
        fixed = st.fixed_dictionaries({k: v for k, v in strategies.items() if k in required},
                                      optional={k: v for k, v in strategies.items() if k not in required})
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and not properties:
            keys = hints.get(f"{where}.{key}.keys", st.text(max_size=8))
            return st.dictionaries(keys, from_schema(extra, root, hints, where, key), max_size=3)
        return fixed
    return JSON_VALUES


# --- near-valid and hostile variants ---------------------------------------------------------


def _deep(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"a": value}
    return value


HUGE_TEXT = st.builds(lambda unit, n: unit * n, st.sampled_from(["a", "😀", "\r\n", "é\u200b"]),
                      st.integers(5_000, 60_000))
LONE_SURROGATES = st.sampled_from(["\ud800", "a\udfffb", "\udc00\ud800", "😀\ud83d"])
HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.sampled_from([-1, 2**31 - 1, 2**31, 2**53 + 1, 2**63, 2**64, -(2**31) - 1]),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=10), LONE_SURROGATES, HUGE_TEXT,
    st.builds(_deep, st.integers(20, 300), JSON_LEAVES),
    st.lists(JSON_LEAVES, max_size=3), st.dictionaries(st.text(max_size=5), JSON_LEAVES, max_size=3),
    st.sampled_from(["", "not a uri", "file://", "file:///%ZZ", "http://[::1", "file:///../../etc/passwd",
                     "untitled:1", "file:///ws/" + "x" * 5000]),
    st.just({"jsonrpc": "2.0", "id": 1, "method": "textDocument/codeAction", "params": 5}),
)
UNKNOWN_KEYS = st.sampled_from(["bogus", "textdocument", "__proto__", "jsonrpc", "Message", "id", "x" * 300])


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*path, i))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Callable[[Any], Any]) -> Any:
    if not path:
        return new(value)
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replace(copy[path[0]], path[1:], new)
    return copy


_REMOVED = object()


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[Any]) -> Any:
    """A valid value changed in one or two places: a field removed, an unknown one added, a value
    of the wrong type, huge, deeply nested, a number just out of range, the whole params replaced."""
    value = draw(base)
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(_paths(value)))
        how = draw(st.sampled_from(["remove", "add", "replace", "replace", "nudge", "wrap", "whole"]))
        if how == "whole":
            value = draw(st.one_of(HOSTILE, st.just([]), st.just(None), st.builds(lambda v: [v], st.just(value))))
            continue
        if how == "remove" and path:
            parent = value
            for part in path[:-1]:
                parent = parent[part]
            if isinstance(parent, dict):
                value = _replace(value, path[:-1], lambda p: {k: v for k, v in p.items() if k != path[-1]})
                continue
        if how == "add":
            key, extra = draw(UNKNOWN_KEYS), draw(HOSTILE)
            value = _replace(value, path, lambda p: {**p, key: extra} if isinstance(p, dict) else p)
            continue
        if how == "nudge":
            delta = draw(st.sampled_from([-1, 1, 2**31, -(2**31)]))
            value = _replace(value, path, lambda p: p + delta if type(p) is int else p)
            continue
        if how == "wrap":
            value = _replace(value, path, lambda p: draw(st.sampled_from([[p], {"value": p}, str(p)])))
            continue
        hostile = draw(HOSTILE)
        value = _replace(value, path, lambda p: hostile)
    return value


@st.composite
def fuzzed(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    """Valid params about a third of the time, else near-valid or hostile ones."""
    return draw(valid) if draw(st.integers(0, 2)) == 0 else draw(mutated(valid))


def examples(strategy: st.SearchStrategy[Any], count: int, seed_value: int) -> list[Any]:
    """`count` values drawn by hypothesis (generation only: nothing to shrink against a server)."""
    drawn: list[Any] = []

    @seed(seed_value)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    while len(drawn) < count:
        collect()
        seed_value += 1
        collect = seed(seed_value)(collect)  # type: ignore[assignment]
    return drawn[:count]


def on_the_wire(value: Any) -> Any:
    """`value` as the server reads it: JSON joins a high and a low surrogate into one character,
    and Margin reads a lone one as U+FFFD (UTF-8 cannot carry it). Done on the JSON text, which
    may be nested deeper than Python's recursion allows a walk over the value."""
    return json.loads(_ESCAPE.sub(_whole, json.dumps(value)))


_ESCAPE = re.compile(r"\\\\|\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}|\\ud[89a-f][0-9a-f]{2}")
"""an escaped backslash, a surrogate pair, or a lone surrogate (json.dumps writes lower case)"""


def _whole(match: re.Match[str]) -> str:
    escape = match.group()
    return "\\ufffd" if len(escape) == 6 and escape != "\\\\" else escape


# --- what the models say ---------------------------------------------------------------------


@dataclass
class Verdict:
    valid: bool
    fields: list[str] = field(default_factory=list)
    """the offending fields' paths (one of them must be in the InvalidParams message)"""


def pydantic_verdict(model: type[BaseModel], params: Any, where: str = "") -> Verdict:
    if params is None or params == []:
        params = {}
    try:
        model.model_validate(params)
    except ValidationError as error:
        paths = [".".join([where, *map(str, e["loc"])] if where else list(map(str, e["loc"]))) or "params"
                 for e in error.errors()]
        return Verdict(False, paths)
    except RecursionError:
        return Verdict(False, [where or "params"])
    return Verdict(True)


_CONVERTER = default_converter()
_PART = re.compile(r"\.([A-Za-z_]\w*)|\[(\d+)\]")


def lsp_verdict(method: str, params: Any) -> tuple[Verdict, Any]:
    """What lsprotocol makes of a message's params: a verdict, and the structured params."""
    message_type = types.METHOD_TO_TYPES[method][0]
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    try:
        return Verdict(True), _CONVERTER.structure(message, message_type).params
    except cattrs.BaseValidationError as error:
        paths = []
        for line in transform_error(error):
            where = line.rpartition(" @ ")[2].removeprefix("$")
            parts = [_camel(name) if name else index for name, index in _PART.findall(where)]
            paths.append(".".join(parts[1:]) or "params")
        return Verdict(False, paths), None
    except Exception:  # noqa: BLE001 - lsprotocol's own hooks raise plain exceptions too
        return Verdict(False, ["params"]), None


# --- the client's copy of the open documents --------------------------------------------------

_BREAK = re.compile(r"\r\n|\r|\n")


def utf16_offset(text: str, line: int, character: int) -> int:
    """The offset of an LSP position counted in UTF-16 units: past the line's end is its end,
    past the last line the end of the text, inside a surrogate pair the character's start."""
    starts = [0] + [m.end() for m in _BREAK.finditer(text)]
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = len(text)
    if line + 1 < len(starts):
        end = _BREAK.search(text, start).start()  # type: ignore[union-attr]
    units = 0
    for index in range(start, end):
        width = 2 if ord(text[index]) > 0xFFFF else 1
        if units + width > character:
            return index
        units += width
    return end


@dataclass
class Mirror:
    """The documents as the client believes the server holds them: uri → (version, text)."""

    documents: dict[str, tuple[int, str]] = field(default_factory=dict)
    applied: int = 0
    refused: int = 0

    def did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        self.documents[doc.uri] = (doc.version, doc.text)

    def did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        self.documents.pop(params.text_document.uri, None)

    def did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        """Applied whole, or (not open, an older version, a range ending before its start) not at all."""
        uri, version = params.text_document.uri, params.text_document.version
        if uri not in self.documents or version < self.documents[uri][0]:
            self.refused += 1
            return
        text = self.documents[uri][1]
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                r = change.range
                begin = utf16_offset(text, r.start.line, r.start.character)
                finish = utf16_offset(text, r.end.line, r.end.character)
                if finish < begin:
                    self.refused += 1
                    return
                text = text[:begin] + change.text + text[finish:]
            else:
                text = change.text
        self.documents[uri] = (version, text)
        self.applied += 1

    def fingerprints(self) -> dict[str, tuple[int, str]]:
        return {uri: (version, "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())
                for uri, (version, text) in self.documents.items()}
