"""Memories: margin/remember (a fact for this workspace folder or every workspace),
margin/forget and margin/memories."""

from __future__ import annotations

from typing import Any

from margin import deferred
from margin.lsp.server import MarginLanguageServer, answering_failures, parse_params

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
wire = deferred.module("margin.lsp.wire_memories")

REMEMBER = "margin/remember"
FORGET = "margin/forget"
MEMORIES = "margin/memories"


async def remember(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(wire.RememberParams, params, REMEMBER)
    with answering_failures():
        memory = await ls.services.memories.remember(request.text, request.scope, request.uri)
    return wire.RememberResult(id=memory.id).dump()


async def forget(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(wire.ForgetParams, params, FORGET)
    return wire.ForgetResult(removed=await ls.services.memories.forget(request.id)).dump()


async def memories(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(wire.MemoriesParams, params, MEMORIES)
    service = ls.services.memories
    found = await service.memories(request.uri)
    return wire.MemoriesResult(memories=[wire.MemoryModel.of(m) for m in found],
                               persistent=service.persistent).dump()


def register(server: MarginLanguageServer) -> None:
    server.feature(REMEMBER)(remember)
    server.feature(FORGET)(forget)
    server.feature(MEMORIES)(memories)
