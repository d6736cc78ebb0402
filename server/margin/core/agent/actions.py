"""A model's answer read as the agent's next action, whichever way the model acts:

- `native`: the backend's tool calls (`tool_calls` of the reply), or, when it made none, an
  action written in its text as below (a model that prints the call instead of making it);
- `json`: the whole answer is one JSON action, `{"tool": NAME, "args": {...}}`, the request held
  to tools.action_schema();
- `text`: the answer holds the action somewhere, as small models write it: a fenced JSON block,
  `<tool_call>{...}</tool_call>`, `<function=NAME>{...}</function>` or
  `<function=NAME><parameter=ARG>value</parameter></function>`, with `{"tool", "args"}` or
  `{"name", "arguments"}` inside.

Every answer reads as calls to run, or a final answer, or named rejections to tell the model:
nothing a model asked for is dropped without a word. Only offered tools are called; arguments
are checked against the tool's schema (an integer written as "12" is taken as 12, which small
models do; anything else wrong is named). An answer that describes a call instead of making one
("I will use the read tool on main.py") is told so, as `described`."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from margin.core.agent.tools import FINISH, MAX_LINE, TOOLS, Tool
from margin.core.llm import ToolCall

Protocol = Literal["native", "json", "text"]
Refusal = Literal["malformed", "unknown tool", "bad arguments", "described", "one at a time", "empty"]


@dataclass(frozen=True)
class Call:
    tool: Tool
    args: dict[str, Any]
    id: str
    """the backend's id for a native call (its answer goes back under it), else one made"""


@dataclass(frozen=True)
class Rejected:
    kind: Refusal
    told: str
    """what the model is told, so that it can do better on the next step"""


@dataclass(frozen=True)
class Read:
    """What an answer asked for."""

    calls: tuple[Call, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    text: str = ""
    """the answer's own words, the action taken out"""

    @property
    def final(self) -> str | None:
        """The answer to the person when the step ends the turn: `finish`'s, or an answer with
        no call and nothing rejected (a model that simply answers)."""
        for call in self.calls:
            if call.tool is FINISH:
                return str(call.args.get("answer", ""))
        if not self.calls and not self.rejected:
            return self.text
        return None


@dataclass
class _Found:
    name: str
    args: Any
    id: str = ""
    problems: list[Rejected] = field(default_factory=list)


def read_answer(protocol: Protocol, content: str, tool_calls: Sequence[ToolCall] = (),
                tools: Sequence[Tool] = TOOLS, step: int = 0) -> Read:
    """The action(s) in a model's answer at `step` (ids are made from it when the model gave none)."""
    offered = {tool.name: tool for tool in tools}
    if tool_calls:  # whatever the protocol, calls the backend made are the model's
        found = [_native(call) for call in tool_calls]
        return _checked(found, offered, content.strip(), one_only=False)
    if protocol == "json":
        whole = _json(content.strip())
        if isinstance(whole, dict) and ("tool" in whole or "name" in whole):
            return _checked([_from_object(whole, f"s{step}a0")], offered, "", one_only=True)
        if whole is _BAD and content.lstrip().startswith("{"):  # an action cut short, or broken
            return _checked([_from_object({"tool": None}, f"s{step}a0")], offered, "", one_only=True)
    found = [_from_object(obj, f"s{step}a{i}") for i, obj in enumerate(_embedded(content))]
    found = [f for f in found if f.name or f.problems]
    if not found:
        return _unless_described(content, offered)
    return _checked(found, offered, _without_actions(content), one_only=True)


def _native(call: ToolCall) -> _Found:
    args = _json(call.arguments) if call.arguments.strip() else {}
    if args is _BAD:
        return _Found(call.name, {}, call.id, [Rejected(
            "malformed", f"The arguments of your {call.name} call are not valid JSON: write them as a JSON object.")])
    return _Found(call.name, args, call.id)


def _from_object(obj: dict[str, Any], made_id: str) -> _Found:
    """An action written as `{"tool", "args"}` or `{"name", "arguments"}` (arguments an object or
    JSON text)."""
    name = obj.get("tool", obj.get("name", ""))
    args = obj.get("args", obj.get("arguments", obj.get("parameters", {})))
    if isinstance(args, str):
        parsed = _json(args)
        args = parsed if parsed is not _BAD else args
    if name is None:
        return _Found("", {}, made_id, [Rejected("malformed", "Your tool call is not valid JSON. Write one action "
                                                 'as a JSON object: {"tool": "read", "args": {"path": "main.py"}}.')])
    if not isinstance(name, str):
        return _Found("", {}, made_id, [Rejected("malformed", 'Name the tool as a string: {"tool": "read", ...}.')])
    return _Found(name, args, made_id)


def _checked(found: Sequence[_Found], offered: dict[str, Tool], text: str, one_only: bool) -> Read:
    calls: list[Call] = []
    rejected: list[Rejected] = []
    for item in found:
        if item.problems:
            rejected.extend(item.problems)
            continue
        tool = offered.get(item.name)
        if tool is None:
            rejected.append(Rejected("unknown tool", f"There is no tool {item.name!r}. The tools are: "
                                     f"{', '.join(offered)}."))
            continue
        args, problem = check_args(tool, item.args)
        if problem:
            rejected.append(Rejected("bad arguments", problem))
        elif one_only and calls:
            rejected.append(Rejected("one at a time", f"Only your first call ran; {tool.name} did not. "
                                     "Call one tool per answer."))
        else:
            calls.append(Call(tool, args, item.id))
    return Read(tuple(calls), tuple(rejected), text)


def check_args(tool: Tool, args: Any) -> tuple[dict[str, Any], str | None]:
    """The arguments as the tool takes them, or what is wrong with them (for the model)."""
    takes = ", ".join(tool.properties)
    if not isinstance(args, dict):
        return {}, f"The arguments of {tool.name} are a JSON object: {{{takes}}}."
    unknown = [name for name in args if name not in tool.properties]
    if unknown and (tool.schema is None or tool.schema.get("additionalProperties") is False):
        return {}, f"{tool.name} takes {takes or 'no arguments'}, not {', '.join(map(repr, unknown))}."
    missing = [name for name in tool.required if name not in args]
    if missing:
        return {}, f"{tool.name} needs {', '.join(map(repr, missing))}."
    if tool.schema is not None:
        return _typed_external(tool, args)
    taken: dict[str, Any] = {}
    for name, value in args.items():
        kind = tool.properties[name]["type"]
        if kind == "integer":
            if isinstance(value, str) and value.strip().isdigit():
                value = int(value.strip())
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LINE:
                return {}, f"{tool.name}'s {name} is a whole number of at least 1, not {json.dumps(value)[:40]}."
        elif not isinstance(value, str):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)
            else:
                return {}, f"{tool.name}'s {name} is text, not {json.dumps(value)[:40]}."
        taken[name] = value
    return taken, None


_BAD = object()
_KINDS: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
                                       "array": (list,), "object": (dict,)}


def _typed_external(tool: Tool, args: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """An MCP tool's values against its own schema's top-level types (a number or a yes/no
    written as text is taken as one); its names were checked by check_args. Deeper checks are the
    server's: it answers a bad call with an error."""
    taken: dict[str, Any] = {}
    for name, value in args.items():
        spec = tool.properties.get(name)
        kind = spec.get("type") if isinstance(spec, dict) else None
        if isinstance(kind, str) and kind in _KINDS:
            if isinstance(value, str) and kind in ("integer", "number"):
                try:
                    value = int(value.strip()) if kind == "integer" else float(value.strip())
                except ValueError:
                    pass
            elif isinstance(value, str) and kind == "boolean" and value.strip().lower() in ("true", "false"):
                value = value.strip().lower() == "true"
            fits = isinstance(value, _KINDS[kind]) and (kind == "boolean" or not isinstance(value, bool))
            if not fits:
                return {}, f"{tool.name}'s {name} is {'an' if kind[0] in 'aio' else 'a'} {kind}, not {json.dumps(value)[:40]}."
        taken[name] = value
    return taken, None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _BAD


_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n(.*?)\n?```", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FUNCTION = re.compile(r"<function=([A-Za-z_][\w-]*)>(.*?)</function>", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([A-Za-z_]\w*)>\n?(.*?)\n?</parameter>", re.DOTALL)


def _embedded(content: str) -> list[dict[str, Any]]:
    """The actions written in an answer, in order; a place that holds an action's start but not
    valid JSON gives `{"tool": None}` (told to the model as malformed)."""
    found: list[tuple[int, int, dict[str, Any]]] = []
    for match in _FUNCTION.finditer(content):
        body = match.group(2).strip()
        parsed = _json(body) if body.startswith("{") else _BAD
        args = parsed if parsed is not _BAD else dict(_PARAMETER.findall(body))
        found.append((match.start(), match.end(), {"tool": match.group(1), "args": args}))
    for pattern in (_TOOL_CALL, _FENCE):
        for match in pattern.finditer(content):
            if any(start < match.end() and match.start() < end for start, end, _ in found):
                continue  # a <function=…> inside it, or inside one already read
            body = match.group(1).strip()
            obj = _json(body)
            if isinstance(obj, dict) and ("tool" in obj or "name" in obj):
                found.append((match.start(), match.end(), obj))
            elif pattern is _TOOL_CALL or (obj is _BAD and re.search(r'"(?:tool|name)"\s*:', body)):
                found.append((match.start(), match.end(), {"tool": None}))
    whole = _json(content.strip())
    if not found and isinstance(whole, dict) and ("tool" in whole or "name" in whole):
        found.append((0, len(content), whole))
    return [obj for _, _, obj in sorted(found, key=lambda item: item[0])]


def _without_actions(content: str) -> str:
    """The answer's words, its actions taken out."""
    for pattern in (_FUNCTION, _TOOL_CALL):
        content = pattern.sub("", content)
    content = _FENCE.sub(lambda m: "" if isinstance(_json(m.group(1).strip()), dict) else m.group(0), content)
    return content.strip()


def _unless_described(content: str, offered: dict[str, Tool]) -> Read:
    """An answer with no call: final, unless it describes a call instead of making one, or says
    nothing at all."""
    if not content.strip():
        return Read((), (Rejected("empty", "Your answer was empty. Call one tool, or call finish with your answer."),))
    if described_call(content, offered):
        names = ", ".join(name for name in offered)
        return Read((), (Rejected("described", "You described a tool call instead of making it. To use a tool, "
                                  f"call it ({names}); to end, call finish with your answer."),), content.strip())
    return Read(text=content.strip())


def described_call(content: str, offered: dict[str, Tool]) -> bool:
    """The answer talks of calling an offered tool, or holds a tool's JSON that is not an action
    (`{"path": "main.py"}`, a call's name written out as `read("main.py")`)."""
    names = "|".join(re.escape(name) for name in offered if name != FINISH.name)
    if not names:
        return False
    if re.search(rf"\b(?:call|use|using|invoke|run)\s+(?:the\s+)?`?(?:{names})`?\s+(?:tool|function)\b", content, re.IGNORECASE):
        return True
    if re.search(rf"(?<![\w.])`?(?:{names})`?\(\s*[\"'{{]", content):
        return True
    arg_names = {arg for tool in offered.values() for arg in tool.properties}
    for obj in re.findall(r"\{[^{}]*\}", content):
        parsed = _json(obj)
        if isinstance(parsed, dict) and parsed and set(parsed) <= arg_names:
            return True
    return False
