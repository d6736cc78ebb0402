"""Generates Margin's protocol reference, JSON schemas and the VS Code client's types from the
server's one protocol description.

server/margin/lsp/methods.py declares each of Margin's own methods and commands once (name,
params and result models, what it is for); the pydantic models in server/margin/lsp/wire*.py
declare each field (type, rules, and the docstring under it), or take the fields of a service's
model they build on (margin/status's profiles). From them this script writes:

- docs/protocol.md: every method, when to use it, its params and result fields with their
  types and docs, and its errors;
- docs/protocol/<method>.schema.json: a JSON schema per method (`params`, `result` and, for a
  streamed request, `partialResult`), `/` in the name written as `-`;
- client-vscode/src/pure/protocol.generated.ts: the method and command names, each model as a
  TypeScript interface, and `Requests`, each request's params and result by name.

    .venv/bin/python scripts/generate_protocol.py           # write them
    .venv/bin/python scripts/generate_protocol.py --check   # exit 1 if any is stale
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "server"))  # this checkout's models, not an installed copy
sys.path.insert(0, str(REPO / "scripts"))

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

import generated_files
from margin import lsp
from margin.lsp import methods
from margin.lsp.methods import Method
from margin.lsp.server import REQUEST_FAILED

DOC = REPO / "docs" / "protocol.md"
SCHEMAS = REPO / "docs" / "protocol"
TYPES_TS = REPO / "client-vscode" / "src" / "pure" / "protocol.generated.ts"
COMMAND = ".venv/bin/python scripts/generate_protocol.py"
WIRE_MODULES = tuple(importlib.import_module(f"margin.lsp.{m.name}") for m in pkgutil.iter_modules(lsp.__path__)
                     if m.name.startswith("wire"))
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
KEPT_RULES = {"minLength": "at least {} character(s)", "maxLength": "at most {} characters",
              "minimum": "at least {}", "maximum": "at most {}"}


# --- the models' JSON schemas, with each field's docstring ---------------------------------

def field_docs() -> dict[tuple[str, str], str]:
    """The docstring under each field of the wire models and of the models they build on (a
    service's model, whose fields the wire sends as they are), by (class, attribute)."""
    docs = {}
    sources = {Path(inspect.getfile(k)) for model in _models().values() for k in model.__mro__
               if k.__module__.startswith("margin.")}
    for source in sorted(sources):
        for node in ast.parse(source.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef):
                continue
            for field, after in zip(node.body, node.body[1:]):
                if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                        and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                        and isinstance(after.value.value, str)):
                    docs[(node.name, field.target.id)] = inspect.cleandoc(after.value.value)
    return docs


def _models() -> dict[str, type[BaseModel]]:
    return {name: value for module in WIRE_MODULES for name, value in vars(module).items()
            if isinstance(value, type) and issubclass(value, BaseModel)}


def _field_doc(model: type[BaseModel], alias: str, docs: dict[tuple[str, str], str]) -> str | None:
    name = next((n for n, info in model.model_fields.items() if (info.alias or n) == alias), alias)
    return next((docs[(k.__name__, name)] for k in model.__mro__ if (k.__name__, name) in docs), None)


def schemas() -> dict[str, Any]:
    """Every model any method names, as JSON schema `$defs` (params as they are read, results
    and partial results as they are written), each field with its docstring."""
    pairs = []
    for method in methods.ALL:
        pairs += [(method.params_model(), "validation"), (method.result_model(), "serialization")]
        if method.partial:
            pairs.append((method.partial_model(), "serialization"))
    _, schema = models_json_schema(pairs, by_alias=True, ref_template="#/$defs/{model}")
    defs = schema["$defs"]
    models, docs = _models(), field_docs()
    for name, definition in defs.items():
        definition.pop("title", None)
        for alias, prop in definition.get("properties", {}).items():
            prop.pop("title", None)
            if (doc := _field_doc(models[name], alias, docs)) is not None:
                prop["description"] = doc
    return defs


def ref(method_part: str) -> str:
    return method_part.partition(":")[2]


def _refs(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        if "$ref" in schema:
            yield schema["$ref"].rsplit("/", 1)[-1]
        for value in schema.values():
            yield from _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _refs(value)


def reachable(names: list[str], defs: dict[str, Any]) -> list[str]:
    """`names` and every model they refer to, at any depth, in the order of `defs`."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += _refs(defs[name])
    return [name for name in defs if name in seen]


def _parts(method: Method) -> dict[str, str]:
    parts = {"params": ref(method.params), "result": ref(method.result)}
    if method.partial:
        parts["partialResult"] = ref(method.partial)
    return parts


def method_schema(method: Method, defs: dict[str, Any]) -> dict[str, Any]:
    parts = _parts(method)
    return {
        "$schema": SCHEMA_DIALECT,
        "title": method.name,
        "description": method.doc,
        "type": "object",
        "properties": {part: {"$ref": f"#/$defs/{name}"} for part, name in parts.items()},
        "$defs": {name: defs[name] for name in reachable(list(parts.values()), defs)},
    }


def schema_file(method: Method) -> Path:
    return SCHEMAS / f"{method.name.replace('/', '-')}.schema.json"


# --- types as TypeScript and Markdown write them -----------------------------------------------

def type_name(model: str) -> str:
    """A model's name in TypeScript and the reference: `BudgetModel` is `Budget`."""
    return model.removesuffix("Model")


def render(schema: dict[str, Any], name: Callable[[str], str], prim: Callable[[str], str], bar: str,
           record: Callable[[str], str]) -> str:
    """A JSON schema as a type in TypeScript's notation: models as `name`, primitives as `prim`,
    an object of values as `record` write them, `bar` between a union's branches."""
    def inner(s: dict[str, Any]) -> str:
        if "$ref" in s:
            return name(s["$ref"].rsplit("/", 1)[-1])
        if "anyOf" in s:
            return bar.join(inner(branch) for branch in s["anyOf"])
        if "enum" in s or "const" in s:
            return bar.join(prim(json.dumps(v)) for v in s.get("enum", [s.get("const")]))
        kind = s.get("type")
        if kind == "array":
            item = inner(s.get("items", {}))
            return f"({item})[]" if bar in item else f"{item}[]"
        if kind == "object":
            values = s.get("additionalProperties", True)
            return record(prim("unknown") if values in (True, {}) else inner(values))
        if kind in ("integer", "number", "string", "boolean", "null"):
            return prim(kind)
        return prim("unknown")
    return inner(schema)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _about(prop: dict[str, Any]) -> str:
    """A field's docstring, then its checks and default in parentheses."""
    words = [template.format(prop[key]) for key, template in KEPT_RULES.items() if key in prop]
    for branch in prop.get("anyOf", []):
        words += [template.format(branch[key]) for key, template in KEPT_RULES.items() if key in branch]
    if "default" in prop and prop["default"] is not None:
        words.append(f"default `{json.dumps(prop['default'])}`")
    words = [w.replace("at least 1 character(s)", "not empty").replace("(s)", "s") for w in words]
    rules = f"({'; '.join(words)})" if words else ""
    return " ".join(filter(None, [prop.get("description", ""), rules]))


# --- client-vscode/src/pure/protocol.generated.ts ----------------------------------------------

def _ts_doc(text: str, indent: str = "") -> str:
    lines = text.replace("*/", "*\\/").splitlines()
    if len(lines) == 1:
        return f"{indent}/** {lines[0]} */\n"
    return f"{indent}/**\n" + "".join(f"{indent} * {line}".rstrip() + "\n" for line in lines) + f"{indent} */\n"


def _ts_type(schema: dict[str, Any]) -> str:
    return render(schema, type_name, lambda p: "number" if p == "integer" else p, " | ",
                  lambda values: f"Record<string, {values}>")


def _ts_interface(model: str, defs: dict[str, Any], models: dict[str, type[BaseModel]]) -> str:
    """A model as an interface; a subclass of another model extends its interface with the
    fields it adds."""
    definition = defs[model]
    out = _ts_doc(definition["description"]) if definition.get("description") else ""
    base = next((k.__name__ for k in models[model].__bases__ if k.__name__ in defs), None)
    inherited = {field: (prop, field in defs[base].get("required", []))
                 for field, prop in defs[base].get("properties", {}).items()} if base else {}
    out += f"export interface {type_name(model)}{f' extends {type_name(base)}' if base else ''} {{\n"
    required = set(definition.get("required", []))
    for field, prop in definition.get("properties", {}).items():
        if inherited.get(field) == (prop, field in required):
            continue  # as the base interface has it
        out += _ts_doc(_about(prop), "  ") if _about(prop) else ""
        out += f"  {field}{'' if field in required else '?'}: {_ts_type(prop)};\n"
    return out + "}\n"


def _ts_key(name: str) -> str:
    return name.split("/", 1)[-1].split(".", 1)[-1]


def types_ts(defs: dict[str, Any]) -> str:
    names = [type_name(model) for model in defs]
    clashes = {n for n in names if names.count(n) > 1}
    if clashes:
        raise ValueError(f"models with the same TypeScript name: {sorted(clashes)}")

    def names_const(const: str, doc: str, group: tuple[Method, ...]) -> str:
        items = "".join(f"  {_ts_key(m.name)}: {json.dumps(m.name)},\n" for m in group)
        return f"/** {doc} */\nexport const {const} = {{\n{items}}} as const;\n"

    requests = "".join(
        f"  {json.dumps(m.name)}: {{ params: {type_name(ref(m.params))}; result: {type_name(ref(m.result))} }};\n"
        for m in methods.REQUESTS)
    return "\n".join([
        ("// Margin's protocol: its methods, commands and wire types. GENERATED from the server's\n"
        "// protocol description (server/margin/lsp/methods.py and the models in lsp/wire*.py) by\n"
        f"// scripts/generate_protocol.py: do not edit; run `{COMMAND}`.\n"
        "// docs/protocol.md says what each one is for.\n"),
        names_const("METHODS", "Margin's own requests.", methods.REQUESTS),
        names_const("COMMANDS", "Margin's commands (workspace/executeCommand; the params are the one argument).",
                    methods.COMMANDS),
        f"/** Each request's params and result. */\nexport interface Requests {{\n{requests}}}\n",
        *(_ts_interface(model, defs, _models()) for model in defs),
    ])


# --- docs/protocol.md --------------------------------------------------------------------------

def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading (the first of that name)."""
    return "".join(c for c in heading.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def _method_anchors() -> dict[str, str]:
    """Each method's anchor: GitHub numbers a repeated one (margin.applyOps after margin/applyOps)."""
    anchors: dict[str, str] = {}
    for method in methods.ALL:
        base = _anchor(method.name)
        repeats = sum(_anchor(name) == base for name in anchors)
        anchors[method.name] = f"{base}-{repeats}" if repeats else base
    return anchors


def _md_type(schema: dict[str, Any], nested: set[str]) -> str:
    def name(model: str) -> str:
        shown = type_name(model)
        return f"[{shown}](#{_anchor(shown)})" if model in nested else f"`{shown}`"
    return render(schema, name, lambda p: f"`{p}`", " \\| ", lambda values: f"object of {values}")


def _md_fields(definition: dict[str, Any], nested: set[str]) -> str:
    properties = definition.get("properties", {})
    if not properties:
        return "No fields: `{}`.\n" if definition.get("additionalProperties") is False else "Any object.\n"
    required = set(definition.get("required", []))
    rows = ["| field | type | about |", "| --- | --- | --- |"]
    for field, prop in properties.items():
        about = _one_line(_about(prop))
        shown = f"`{field}`" if field in required else f"`{field}?`"
        about = about.replace("|", "\\|")
        rows.append(f"| {shown} | {_md_type(prop, nested)} | {about} |")
    return "\n".join(rows) + "\n"


def _md_model(title: str, model: str, defs: dict[str, Any], nested: set[str]) -> str:
    definition = defs[model]
    about = f" {_one_line(definition['description'])}" if definition.get("description") else ""
    return f"**{title}** `{type_name(model)}`.{about}\n\n{_md_fields(definition, nested)}"


def _md_method(method: Method, defs: dict[str, Any], nested: set[str]) -> str:
    out = [f"### {method.name}\n", f"{method.doc}\n", f"{method.use}\n"]
    titles = {"params": "Params" if method.kind != "command" else "Argument", "result": "Result",
              "partialResult": "Each partial result"}
    out += [_md_model(titles[part], model, defs, nested) for part, model in _parts(method).items()]
    errors = "InvalidParams naming each bad field and the rule it breaks" + (
        f"; {method.errors}" if method.errors else ".")
    out.append(f"**Errors**: {errors}\n")
    out.append(f"JSON schema: [{schema_file(method).name}](protocol/{schema_file(method).name})\n")
    return "\n".join(out)


INTRO = f"""Margin answers the standard LSP requests it offers (document sync, code actions, inline
completion) and its own requests and commands below. Fields are camelCase; a field marked `?`
may be left out (in a result: it is absent when it does not apply). The server lists its own
requests under `capabilities.experimental.margin.methods` in its `initialize` reply.

## Errors

| code | name | when |
| --- | --- | --- |
| -32602 | InvalidParams | params that do not fit the method's model: the message names each bad field and the rule (`margin/chat: invalid params: message: String should have at least 1 character`); unknown fields are refused |
| {REQUEST_FAILED} | RequestFailed | a request that cannot be served (busy, not found, a disabled profile, an over-budget prompt for a selection edit, a model server that fails): the message says what happened and what to do |
| -32800 | RequestCancelled | the client cancelled the request (`$/cancelRequest`, or the cancel button of margin/chat's work-done progress) |
| -32601 | MethodNotFound | a method Margin does not answer |
"""


def protocol_md(defs: dict[str, Any]) -> str:
    nested = {name for model in defs for name in _refs(defs[model])}
    anchors = _method_anchors()
    groups = [("Requests", methods.REQUESTS), ("Commands", methods.COMMANDS),
              ("Standard methods Margin reads its own way", methods.STANDARD),
              ("Notifications from the client", methods.NOTIFICATIONS)]
    out = ["<!-- GENERATED from server/margin/lsp/methods.py and the models in server/margin/lsp/wire*.py",
           f"     by scripts/generate_protocol.py: do not edit; run `{COMMAND}`. -->\n",
           "# Margin's protocol\n", INTRO]
    for title, group in groups:
        out.append(f"## {title}\n")
        out.append("| method | |\n| --- | --- |\n" + "".join(
            f"| [{m.name}](#{anchors[m.name]}) | {m.doc} |\n" for m in group))
        out += [_md_method(method, defs, nested) for method in group]
    out.append("## Types\n\nThe types the fields above refer to.\n")
    for model, definition in defs.items():
        if model in nested:
            about = f"{_one_line(definition['description'])}\n\n" if definition.get("description") else ""
            out.append(f"### {type_name(model)}\n\n{about}{_md_fields(definition, nested)}")
    return "\n".join(out)


# --- writing and checking ----------------------------------------------------------------------

def generated() -> dict[Path, str]:
    """Each generated file and the text it should hold."""
    defs = schemas()
    files = {DOC: protocol_md(defs), TYPES_TS: types_ts(defs)}
    for method in methods.ALL:
        files[schema_file(method)] = json.dumps(method_schema(method, defs), indent=2) + "\n"
    return files


def obsolete(files: dict[Path, str]) -> set[Path]:
    """The schema files no method writes any more."""
    return set(SCHEMAS.glob("*.schema.json")) - set(files)


def stale() -> list[Path]:
    """The generated files whose committed text differs from what this script writes, and any
    schema file no method writes any more."""
    return generated_files.stale(generated, obsolete)


def main(argv: list[str] | None = None) -> int:
    return generated_files.main(argv, description=__doc__.splitlines()[0], repo=REPO, command=COMMAND,
                                generated=generated, obsolete=obsolete)


if __name__ == "__main__":
    sys.exit(main())
