"""Chat and its threads: margin/chat (streamed as partial results, with cancellable work-done
progress), margin/explain, margin/history, margin/recall (what a pointer stood for), margin/threads,
margin/newThread, margin/deleteThread."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from margin import deferred
from margin.lsp.methods import CHAT, DELETE_THREAD, EXPLAIN, HISTORY, NEW_THREAD, RECALL, THREADS
from margin.lsp.server import MarginLanguageServer, RequestFailed, answering_failures, parse_params
from margin.services.errors import RequestError

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
with deferred.imports():
    from margin.lsp import wire
    from margin.services import agent_turn


async def chat(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(CHAT.params_model(), params, CHAT.name)
    token = request.partial_result_token

    def on_delta(text: str) -> None:
        if token is not None:
            ls.progress(types.ProgressParams(token=token, value=wire.ChatDelta(delta=text).dump()))

    ls.start_work(request.work_done_token, "Margin is answering")
    ending = "cancelled"
    try:
        outcome = await ls.services.chat.chat(request.core(), on_delta)
        ending = "not sent" if outcome.not_sent else "done"
    except RequestError as error:
        ending = "failed"
        raise RequestFailed(str(error)) from None
    finally:
        ls.end_work(request.work_done_token, ending)
    result = wire.ChatResult(thread_id=outcome.thread_id, reply=outcome.reply, usage=wire.UsageModel.of(outcome.usage),
                             budget=wire.BudgetModel.of(outcome.budget))
    if outcome.not_sent:
        result.message = outcome.not_sent
    if outcome.recalls:
        result.recalls = [wire.RecallMadeModel(**made) for made in outcome.recalls]
    return result.dump()


async def explain(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(EXPLAIN.params_model(), params, EXPLAIN.name)
    if request.profile == "agent":  # the agent's next step, not a chat prompt
        with answering_failures():
            ask = request.core()
            agent = await ls.services.agent.explain(agent_turn.AgentAsk(ask.message, ask.where))
        explained = wire.ExplainResult(thread_id=agent.thread_id, budget=wire.BudgetModel.of(agent.budget),
                                       messages=wire.ExplainResult.messages_of(agent.messages), tools=agent.tools)
        if agent.over_budget:
            explained.message = agent.over_budget
        return explained.dump()
    with answering_failures():
        prepared = await ls.services.chat.explain(request.core(), request.profile)
    result = wire.ExplainResult(thread_id=prepared.thread.id, budget=wire.BudgetModel.of(prepared.budget()),
                                messages=wire.ExplainResult.messages_of(prepared.assembly.messages))
    if prepared.assembly.over_budget:
        result.message = prepared.assembly.over_budget
    if prepared.assembly.tools:
        result.tools = [tool["function"]["name"] for tool in prepared.assembly.tools]
    return result.dump()


async def history(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(HISTORY.params_model(), params, HISTORY.name)
    with answering_failures():
        found = await ls.services.threads.history(request.where())
    return wire.HistoryResult(thread_id=found.thread.id,
                              messages=[wire.HistoryMessageModel.of(m) for m in found.messages]).dump()


async def recall(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(RECALL.params_model(), params, RECALL.name)
    with answering_failures():
        found = await ls.services.threads.recall(request.where(), request.pointer)
    result = wire.RecallResult(thread_id=found.thread.id, pointer=found.recalled.pointer,
                               content=found.recalled.content)
    if found.file_id is not None:
        result.file_id, result.fingerprint, result.changed_since = \
            found.file_id, found.recalled.fingerprint, found.changed_since
    return result.dump()


async def threads(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(THREADS.params_model(), params, THREADS.name)
    found = await ls.services.threads.list_threads(request.workspace)
    return wire.ThreadsResult(threads=[wire.ThreadModel.of(t) for t in found.threads],
                              persistent=found.persistent).dump()


async def new_thread(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(NEW_THREAD.params_model(), params, NEW_THREAD.name)
    thread = await ls.services.threads.new(request.where(), request.title)
    return wire.NewThreadResult(thread_id=thread.id).dump()


async def delete_thread(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(DELETE_THREAD.params_model(), params, DELETE_THREAD.name)
    return wire.DeleteThreadResult(deleted=await ls.services.threads.delete(request.thread_id)).dump()


def register(server: MarginLanguageServer) -> None:
    server.feature(CHAT.name)(chat)
    server.feature(EXPLAIN.name)(explain)
    server.feature(HISTORY.name)(history)
    server.feature(RECALL.name)(recall)
    server.feature(THREADS.name)(threads)
    server.feature(NEW_THREAD.name)(new_thread)
    server.feature(DELETE_THREAD.name)(delete_thread)
