"""The agent's prompt for each step: the system prompt (the template's instructions, the tools in
words unless the model calls them natively, the pointer legend when pointers are shown), what
offering the tools costs, and the step's messages fitted to the limit (core.agent.steps shapes
them, tighter until they fit), counted exactly."""

from __future__ import annotations

import json
from typing import Any

from margin.core.agent import steps as agent_steps
from margin.core.agent import tools as agent_tools
from margin.core.agent.actions import Read
from margin.core.agent.steps import Shape
from margin.core.budget import BudgetReport, Dropped, SectionReport
from margin.core.llm import ChatMessage, ToolCall
from margin.services.agent_turn import AgentAsk, Turn
from margin.services.workspace import Workspace


def system(turn: Turn, pointers: bool, with_tools: bool = True) -> str:
    """`with_tools` False: without the tools in words (the budget report counts them apart)."""
    template = turn.profile.template
    parts = [fragment.text for fragment in template.required]
    if turn.protocol != "native" and with_tools:  # the tools in words (with JSON actions, the grammar holds only their shape)
        parts.append(agent_tools.described(turn.tools, fenced=turn.protocol == "text"))
    if pointers and template.pointer_legend:
        parts.append(template.pointer_legend)
    return "\n\n".join(parts)


def tools(turn: Turn) -> list[dict[str, Any]]:
    return agent_tools.native(turn.tools) if turn.protocol == "native" else []


def format(turn: Turn) -> dict[str, Any] | None:
    if turn.protocol != "json":
        return None
    return {"type": "json_schema", "json_schema": {"name": "action", "schema": agent_tools.action_schema(turn.tools)}}


async def tools_tokens(turn: Turn, offered: tuple[agent_tools.Tool, ...] | None = None) -> int:
    """What offering `offered` (the turn's tools) costs in every step's prompt, exactly."""
    counter = turn.profile.counter
    offered = turn.tools if offered is None else offered
    if turn.protocol == "native":
        return await counter.count_chat([], agent_tools.native(offered)) - await counter.count_chat([])
    described = (await counter.count_texts([agent_tools.described(offered, fenced=turn.protocol == "text")]))[0]
    if turn.protocol != "json" or turn.grammar:
        return described
    return described + (await counter.count_texts([json.dumps(agent_tools.action_schema(offered))]))[0]


async def schema_tokens(turn: Turn) -> int:
    """What the action schema may cost in the prompt: nothing where the server holds the answer
    to it by a grammar (llama.cpp, vLLM), else its JSON counted (a server may show it to the model)."""
    if turn.protocol != "json" or turn.grammar:
        return 0
    return (await turn.profile.counter.count_texts([json.dumps(agent_tools.action_schema(turn.tools))]))[0]


async def fit(turn: Turn) -> tuple[list[ChatMessage], int, Shape] | None:
    """The step's prompt within the limit, its exact count and its shape; None when not even
    the tasks, the instructions and the newest step as pointers fit."""
    out = turn.outcome
    assert out is not None
    counter = turn.profile.counter
    shape: Shape | None = agent_steps.first_shape(turn.entries)
    extra = await schema_tokens(turn)
    while shape is not None:
        pointers = bool(agent_steps.shown_pointers(turn.entries, shape)) or shape.left_out > 0
        messages = agent_steps.messages(turn.protocol, system(turn, pointers), turn.entries, shape)
        counted = await counter.count_chat(messages, tools(turn)) + extra
        if counted <= out.limit:
            return messages, counted, shape
        shape = agent_steps.tighter(turn.entries, shape)
    return None



async def report(turn: Turn, counted: int, shape: Shape | None) -> BudgetReport:
    """How the step's prompt spent the window: the instructions, the tools, the steps (with the
    results shown as pointers, and the steps left out) and the task."""
    out = turn.outcome
    assert out is not None
    counter = turn.profile.counter
    system_tokens, task_tokens = await counter.count_texts([system(turn, pointers=False, with_tools=False),
                                                             turn.task_text or turn.ask.task])
    steps = [e for e in turn.entries if isinstance(e, agent_steps.Step)]
    dropped: list[Dropped] = []
    if shape is not None:
        dropped = [Dropped(p, "shown as its pointer") for p in agent_steps.shown_pointers(turn.entries, shape)]
        dropped += [Dropped(f"step {s.number}", "left out to fit") for s in steps[:shape.left_out]]
    shown = len(steps) - (shape.left_out if shape is not None else 0)
    mcp = [t for t in turn.tools if t.effect == "calls"]
    sections = (SectionReport("system", system_tokens, 1, ()),
                SectionReport("tools", out.tools_tokens - out.mcp_tokens, len(turn.tools) - len(mcp), ()),
                *((SectionReport("mcp tools", out.mcp_tokens, len(mcp), ()),) if mcp else ()),
                SectionReport("steps", max(0, counted - system_tokens - out.tools_tokens - task_tokens), shown,
                              tuple(dropped)),
                SectionReport("task", task_tokens, 1, ()))
    return BudgetReport(out.window, turn.profile.max_output_tokens, out.limit, sum(s.tokens for s in sections),
                        counter.name, counter.exact, sections, counted)


def task_text(workspace: Workspace, ask: AgentAsk) -> str:
    """The task as the model reads it: what the person asked, and where they are (the active
    file by its path in the workspace, and the lines selected)."""
    uri, selection = ask.where.text_document, ask.where.selection
    if not uri:
        return ask.task
    file_id = workspace.file_id(uri)
    if selection is None or selection.start == selection.end:
        return f"{ask.task}\n\n(The person has {file_id} open.)"
    start, end = selection.start, selection.end
    last = end.line if end.character > 0 or end.line == start.line else end.line - 1  # a whole last line ends at column 0
    return f"{ask.task}\n\n(The person has {file_id} open, lines {start.line + 1}-{last + 1} selected.)"


def answer_text(turn: Turn, text: str, read: Read, native_calls: tuple[ToolCall, ...]) -> str:
    if turn.protocol == "native" and native_calls:
        return text
    if read.calls and not text.strip():
        call = read.calls[0]
        return agent_steps.action_text(call.tool.name, call.args)
    return text.strip() or (agent_steps.action_text(read.calls[0].tool.name, read.calls[0].args) if read.calls else "")
