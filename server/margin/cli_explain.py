"""`margin explain`: what a request would send, section by section, without calling a model —
chat's and edit-ops' prompts, or the agent's next step (`--profile agent`)."""

from __future__ import annotations

import argparse
import json

from margin import cli_app
from margin.cli_app import CliError, open_services, running_app
from margin.core.budget import BudgetReport
from margin.core.where import Where
from margin.services.agent_turn import AgentAsk
from margin.services.errors import RequestError
from margin.services.turn import Ask


def budget_line(budget: BudgetReport) -> str:
    exactness = "exact" if budget.exact else "approximate"
    return (f"{budget.counted or budget.total} of {budget.limit} tokens "
            f"(window {budget.context_window}, {budget.tokenizer}, {exactness})")


async def explain(args: argparse.Namespace) -> int:
    from margin.lsp.wire import BudgetModel

    async with running_app(args) as (app, _):
        services, uris = open_services(app, args.file)
        ask = Ask(cli_app.message(args), Where(text_document=uris[0] if uris else None, thread_id=args.thread), uris)
        try:
            await services.retrieval.indexed(ask.where.text_document)
            if args.profile == "agent":
                agent = await services.agent.explain(AgentAsk(ask.message, ask.where))
                budget, sent, over, thread_id = agent.budget, agent.messages, agent.over_budget, agent.thread_id
            else:
                prepared = await services.chat.explain(ask, args.profile)
                budget, sent, over = prepared.budget(), prepared.assembly.messages, prepared.assembly.over_budget
                thread_id = prepared.thread.id
        except RequestError as error:
            raise CliError(str(error)) from None
        messages = [m.as_json() for m in sent]
        if args.json:
            print(json.dumps({"budget": BudgetModel.of(budget).dump(), "messages": messages}, indent=2,
                             ensure_ascii=False))
            return 0
        print(f"profile {args.profile} · thread {thread_id or '(a new one)'} · {budget_line(budget)}")
        if over:
            print(f"NOT SENDABLE: {over}")
        for section in budget.sections:
            print(f"  {section.name:<16} {section.tokens:>7} tokens  {section.kept} kept")
            for dropped in section.dropped:
                print(f"  {'':<16} dropped {dropped.item}: {dropped.reason}")
        if args.messages:
            for message in messages:
                print(f"\n--- {message['role']} ---\n{message['content']}")
        return 0
