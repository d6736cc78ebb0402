"""Edit-ops: margin/editOps (a proposal with a versioned preview), and margin/applyOps and the
margin.applyOps command (applied fresh, rebased exactly, or refused)."""

from __future__ import annotations

import functools
import logging
from typing import Any

from lsprotocol import converters

from margin import deferred
from margin.lsp.methods import APPLY_OPS, APPLY_OPS_COMMAND, EDIT_OPS
from margin.lsp.server import MarginLanguageServer, parse_params

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
with deferred.imports():
    from margin.lsp import wire, wire_edits

log = logging.getLogger(__name__)


@functools.cache
def _converter() -> Any:
    """lsprotocol's converter, built on first use (building one costs start-up time)."""
    return converters.get_converter()


async def edit_ops(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(EDIT_OPS.params_model(), params, EDIT_OPS.name)
    outcome = await ls.services.editops.propose(request.core())
    result = wire_edits.EditOpsResult(
        enabled=outcome.enabled, assistant_message=outcome.assistant_message,
        ops=[wire_edits.OpModel.of(op) for op in outcome.ops], base_fingerprints=outcome.base_fingerprints,
        budget=wire.BudgetModel.of(outcome.budget) if outcome.budget else {}, thread_id=outcome.thread_id)
    if outcome.edits:
        result.edit = _converter().unstructure(ls.workspace_edit(outcome.bases, outcome.edits))
    return result.dump()


async def apply_ops(ls: MarginLanguageServer, params: Any, method: str = APPLY_OPS.name, where: str = "") -> dict[str, Any]:
    request = parse_params(APPLY_OPS.params_model(), params, method, where)
    prepared = ls.services.editops.prepare_apply(request.core())
    refused = wire_edits.ApplyOpsResult(applied=False, rebased=False, stale_files=prepared.stale)
    if prepared.failure or prepared.plan is None:
        refused.failure_reason = prepared.failure
        return refused.dump()
    plan = prepared.plan
    failure = await ls.apply_edit(ls.workspace_edit(prepared.files, plan.edits))
    if failure:
        refused.failure_reason = failure
        return refused.dump()
    log.info("ops applied files=%d rebased=%s", len(plan.edits), plan.rebased)
    return wire_edits.ApplyOpsResult(applied=True, rebased=plan.rebased, stale_files=[]).dump()


async def apply_ops_command(ls: MarginLanguageServer, *arguments: Any) -> dict[str, Any]:
    return await apply_ops(ls, arguments[0] if arguments else None, APPLY_OPS_COMMAND.name, "arguments.0")


def register(server: MarginLanguageServer) -> None:
    server.feature(EDIT_OPS.name)(edit_ops)
    server.feature(APPLY_OPS.name)(apply_ops)
    server.command(APPLY_OPS_COMMAND.name)(apply_ops_command)
