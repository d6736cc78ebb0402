"""Code actions on a selection: textDocument/codeAction offers Margin's actions (no model call),
codeAction/resolve asks the edit profile and returns a versioned edit, and the command
margin.editSelection does the same for clients that cannot resolve a code action's edit."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types

from margin import deferred
from margin.lsp.methods import EDIT_SELECTION_COMMAND
from margin.lsp.server import MarginLanguageServer, RequestFailed, answering_failures, parse_params
from margin.services.errors import RequestError

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
with deferred.imports():
    from margin.lsp import convert, wire_edits

log = logging.getLogger(__name__)

COMMAND_ANSWER_S = 5.0
"""How long `margin.editSelection` waits for the model before answering `pending` and applying
the edit when the model is done: editors wait for a command's answer with a time limit of their
own (eglot 10 s, blocking Emacs meanwhile), and a slow model must not run into it."""
REWRITE_KIND = "refactor.rewrite"
FIX_KIND = "quickfix"
"""The base kinds, not sub-kinds of them (`refactor.rewrite.margin` was): eglot's rewrite and
quickfix commands list only actions whose kind equals theirs (eglot 1.9 compares with `equal`);
VS Code's refactor and quick-fix menus and Neovim's `context.only` match by prefix, so the base
kinds are listed everywhere."""


def code_action(ls: MarginLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """Margin's actions for a non-empty selection. Nothing is asked of the model here."""
    uri = params.text_document.uri
    diagnostics = params.context.diagnostics
    problems = [convert.diagnostic(d) for d in diagnostics]
    offered = ls.services.selection_edits.offer(uri, convert.range_(params.range), problems)
    if not offered or not uri:  # an empty URI cannot be carried in `data`
        return []
    only = params.context.only or []
    lazy = ls.resolves_edits()
    actions = []
    for offer in offered:
        request = offer.request
        kind = FIX_KIND if request.kind == "fix" else REWRITE_KIND
        if only and not any(kind == o or kind.startswith(f"{o}.") for o in only):
            continue
        data = wire_edits.SelectionEditData.of(request)
        action = types.CodeAction(offer.title, kind=kind, data=data.dump(), is_preferred=request.kind == "comment",
                                  diagnostics=list(diagnostics) if request.kind == "fix" else None)
        if not lazy:
            action.command = types.Command(title=offer.title, command=EDIT_SELECTION_COMMAND.name, arguments=[data.dump()])
        actions.append(action)
    return actions


async def _edit_selection(ls: MarginLanguageServer, data: Any, method: str, where: str) -> types.WorkspaceEdit:
    request = parse_params(wire_edits.SelectionEditData, data, method, where)
    with answering_failures():
        async with ls.server_progress("Margin is editing the selection"):
            outcome = await ls.services.selection_edits.propose(request.core())
    return ls.workspace_edit({outcome.current.uri: outcome.current}, outcome.plan.edits)


async def resolve_code_action(ls: MarginLanguageServer, params: types.CodeAction) -> types.CodeAction:
    """The chosen action's edit: the model is asked now, and the edit is of the exact text it
    saw (rebased only when the document changed clear of it)."""
    params.edit = await _edit_selection(ls, params.data, types.CODE_ACTION_RESOLVE, "data")
    return params


async def edit_selection_command(ls: MarginLanguageServer, *arguments: Any) -> dict[str, Any]:
    """The edit, applied through workspace/applyEdit. Answered with the outcome when the model
    is done within COMMAND_ANSWER_S: `applied: true`, an error when no edit was made, or an edit
    the editor did not apply as `applied: false` and why (like margin/applyOps), also shown to
    the user, since editors do not show what a command returns. A slower model gets
    `applied: false, pending: true` at COMMAND_ANSWER_S; its edit is applied when it is done
    (`margin/status` lists it under `background` meanwhile), and a failure then is shown to the
    user."""
    request = parse_params(EDIT_SELECTION_COMMAND.params_model(), arguments[0] if arguments else None,
                           EDIT_SELECTION_COMMAND.name, "arguments.0")
    work = ls.app.run_in_background(_edit_and_apply(ls, request), "edit selection")
    try:
        outcome = await asyncio.wait_for(asyncio.shield(work), COMMAND_ANSWER_S)
    except TimeoutError:
        log.info("edit selection answered pending after s=%g", COMMAND_ANSWER_S)
        work.add_done_callback(lambda done: _tell_late_failure(ls, done))
        return wire_edits.EditSelectionResult(applied=False, pending=True).dump()
    except asyncio.CancelledError:
        work.cancel()
        raise
    if isinstance(outcome, RequestError):
        raise RequestFailed(str(outcome))
    if outcome.failure_reason:
        ls.tell_user(f"Margin: {outcome.failure_reason}", types.MessageType.Warning)
    return outcome.dump()


async def _edit_and_apply(ls: MarginLanguageServer, request: wire_edits.SelectionEditData) -> (
        wire_edits.EditSelectionResult | RequestError):
    """The command's work: the model asked, the edit applied. A RequestError is returned, not
    raised, so that whoever reports it (the command's answer, or the user) reports it once."""
    try:
        async with ls.server_progress("Margin is editing the selection"):
            outcome = await ls.services.selection_edits.propose(request.core())
    except RequestError as error:
        return error
    failure = await ls.apply_edit(ls.workspace_edit({outcome.current.uri: outcome.current}, outcome.plan.edits))
    if failure:
        return wire_edits.EditSelectionResult(applied=False, failure_reason=failure)
    return wire_edits.EditSelectionResult(applied=True)


def _tell_late_failure(ls: MarginLanguageServer, work: asyncio.Task[Any]) -> None:
    """A command answered `pending`: what became of its edit, when it was not applied."""
    if work.cancelled() or work.exception() is not None:
        return  # cancelled by the user or at shutdown; a bug is logged by run_in_background
    outcome = work.result()
    reason = str(outcome) if isinstance(outcome, RequestError) else outcome.failure_reason
    if reason:
        log.info("edit selection done after answering pending applied=False")
        ls.tell_user(f"Margin: {reason}", types.MessageType.Warning)
    else:
        log.info("edit selection done after answering pending applied=True")


def register(server: MarginLanguageServer) -> None:
    server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[FIX_KIND, REWRITE_KIND], resolve_provider=True))(code_action)
    server.feature(types.CODE_ACTION_RESOLVE)(resolve_code_action)
    server.command(EDIT_SELECTION_COMMAND.name)(edit_selection_command)
