"""Memories: margin/remember (a fact for this workspace folder or every workspace),
margin/forget and margin/memories."""

from __future__ import annotations

from typing import Any

from margin import deferred
from margin.lsp.methods import FORGET, MEMORIES, REMEMBER
from margin.lsp.server import MarginLanguageServer, answering_failures, parse_params

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
with deferred.imports():
    from margin.lsp import wire_memories as wire


async def remember(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(REMEMBER.params_model(), params, REMEMBER.name)
    with answering_failures():
        memory = await ls.services.memories.remember(request.text, request.scope, request.uri)
    return wire.RememberResult(id=memory.id).dump()


async def forget(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(FORGET.params_model(), params, FORGET.name)
    return wire.ForgetResult(removed=await ls.services.memories.forget(request.id)).dump()


async def memories(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(MEMORIES.params_model(), params, MEMORIES.name)
    service = ls.services.memories
    found = await service.memories(request.uri)
    return wire.MemoriesResult(memories=[wire.MemoryModel.of(m) for m in found],
                               persistent=service.persistent).dump()


def register(server: MarginLanguageServer) -> None:
    server.feature(REMEMBER.name)(remember)
    server.feature(FORGET.name)(forget)
    server.feature(MEMORIES.name)(memories)
