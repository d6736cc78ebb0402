"""The agent's tools: eight, each a name, one line for the model, and the JSON schema of its
arguments, in the shape small models follow best (flat objects of strings and integers, no
`title`: Gemma 3 270M copies titles into its answers; no optional nesting).

The same declaration gives every way a model is offered them (actions.py picks one per model):
native tool definitions (`tools` of a chat request), one JSON action per step held to a schema
(`action_schema`: a `oneOf` over the tools), and a plain list for a model told to write a fenced
JSON action (`described`). Their cost in tokens is counted with the rest of the prompt."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

MAX_LINE = 1_000_000
"""the largest line number an action may name"""

Effect = Literal["reads", "changes", "runs", "calls", "ends"]
"""what a call does: reads (nothing to confirm), changes a file or runs a program (confirmed
first), calls one of the person's MCP tools (confirmed first, unless they opted in for tools
their server marks read-only and closed-world), or ends the turn"""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    """one line for the model"""
    properties: dict[str, dict[str, Any]]
    """each argument's JSON schema (a string or an integer, with one line saying what it is)"""
    required: tuple[str, ...]
    effect: Effect
    schema: dict[str, Any] | None = None
    """an MCP tool's input schema, as its server lists it (None: one of Margin's own tools)"""
    server: str = ""
    """the MCP server it comes from"""
    remote: str = ""
    """its name on that server (`name` is `server__remote`)"""

    def parameters(self, *, closed: bool = False) -> dict[str, Any]:
        """The arguments' JSON schema; `closed`: for a schema the server holds the answer to (a
        grammar): no other property, and whole numbers bounded — unbounded, a small model under
        a grammar writes digits until its output limit. Offered as a native tool the model is
        told the properties, and actions.py names an unknown one or a number out of range."""
        if self.schema is not None:  # an MCP tool: its own schema; under a grammar, only what grammars handle
            if closed and any(key in json.dumps(self.schema) for key in _HARD_FOR_GRAMMARS):
                return {"type": "object"}  # actions.check_args checks the rest
            return self.schema
        if not closed:
            return {"type": "object", "properties": self.properties, "required": list(self.required)}
        bounded = {name: {**spec, "minimum": 1, "maximum": MAX_LINE} if spec["type"] == "integer" else spec
                   for name, spec in self.properties.items()}
        return {"type": "object", "properties": bounded, "required": list(self.required), "additionalProperties": False}

    def native(self) -> dict[str, Any]:
        """As a chat request's `tools` entry."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters()}}


_HARD_FOR_GRAMMARS = ('"$ref"', '"$defs"', '"anyOf"', '"oneOf"', '"allOf"', '"pattern"', '"format"', '"not"')
"""schema keywords a server's schema-to-grammar conversion may not take (llama.cpp's takes a subset)"""


def _text(what: str) -> dict[str, Any]:
    return {"type": "string", "description": what}


def _line(what: str) -> dict[str, Any]:
    return {"type": "integer", "description": what}  # at least 1: checked by actions.check_args


READ = Tool("read", "Read a file (as open in the editor), or some of its lines.",
            {"path": _text("file path in the workspace"), "start": _line("first line (default 1)"),
             "end": _line("last line")}, ("path",), "reads")
LIST = Tool("list", "List a folder's files and folders.",
            {"path": _text("folder path ('.': the top)")}, ("path",), "reads")
SEARCH = Tool("search", "Find code by words or exact text.",
              {"query": _text("words, a name or exact text")}, ("query",), "reads")
EDIT = Tool("edit", "Replace text in a file you have read.",
            {"path": _text("file path in the workspace"),
             "old": _text("the exact text to replace (empty: a new file)"),
             "new": _text("its replacement")}, ("path", "old", "new"), "changes")
EDIT_LINES = Tool("edit", "Replace lines of a file you have read with new text.",
                  {"path": _text("file path in the workspace"), "start": _line("first line to replace"),
                   "end": _line("last line to replace"), "new": _text("the new text of those lines")},
                  ("path", "start", "end", "new"), "changes")
"""`edit` in the shape small models manage: a whole region by its line numbers (read shows them),
rather than an exact copy of the text to replace"""
RUN = Tool("run", "Run a command, e.g. the tests (no network).",
           {"command": _text("the command line")}, ("command",), "runs")
DIAGNOSTICS = Tool("diagnostics", "The problems reported in a file now.",
                   {"path": _text("file path in the workspace")}, ("path",), "reads")
RECALL = Tool("recall", "What an earlier step showed, behind a pointer such as [t12 read a.py].",
              {"pointer": _text("the pointer")}, ("pointer",), "reads")
FINISH = Tool("finish", "End the task with your answer.",
              {"answer": _text("what you did or found")}, ("answer",), "ends")

TOOLS: tuple[Tool, ...] = (READ, LIST, SEARCH, EDIT, RUN, DIAGNOSTICS, RECALL, FINISH)
SMALL_TOOLS: tuple[Tool, ...] = (READ, LIST, SEARCH, EDIT_LINES, RUN, DIAGNOSTICS, RECALL, FINISH)
"""for a small model: `edit` replaces whole lines by number"""
BY_NAME = {tool.name: tool for tool in TOOLS}


def native(tools: Sequence[Tool] = TOOLS) -> list[dict[str, Any]]:
    """The tools as a chat request's `tools`."""
    return [tool.native() for tool in tools]


def action_schema(tools: Sequence[Tool] = TOOLS) -> dict[str, Any]:
    """One action a step, as JSON held to this schema: `{"tool": NAME, "args": {...}}`, a
    `oneOf` over the tools (each branch fixes the name and its arguments' schema)."""
    return {"type": "object", "oneOf": [
        {"type": "object", "properties": {"tool": {"const": tool.name}, "args": tool.parameters(closed=True)},
         "required": ["tool", "args"]} for tool in tools]}


def described(tools: Sequence[Tool] = TOOLS, *, fenced: bool = True) -> str:
    """The tools as a model without tool calls reads them: a line each, with the arguments, then
    how to call one — in a fenced block, or (`fenced=False`, an answer held to the action schema)
    as the whole answer."""
    lines = []
    for tool in tools:
        args = ", ".join(f'"{name}": {_example(spec)}' + ("" if name in tool.required else " (optional)")
                         for name, spec in tool.properties.items())
        lines.append(f"- {tool.name} {{{args}}}: {tool.description}")
    example = '{"tool": "read", "args": {"path": "main.py"}}'
    if not fenced:
        return "Tools:\n" + "\n".join(lines) + f"\n\nAnswer with exactly one action, as JSON: {example}"
    return ("Tools:\n" + "\n".join(lines) + "\n\nCall exactly one tool per answer, as JSON in a fenced block:\n"
            f"```json\n{example}\n```")


def _example(spec: dict[str, Any]) -> str:
    kind = spec.get("type") if isinstance(spec, dict) else None
    return {"integer": "1", "number": "1", "boolean": "true", "array": "[…]", "object": "{…}"}.get(str(kind), '"…"')


def canonical(args: dict[str, Any]) -> str:
    """A call's arguments as one string: the same arguments, however written, give the same."""
    return json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
