"""Code actions on a selection: textDocument/codeAction offers Margin's actions (no model call),
codeAction/resolve asks the edit profile and returns a versioned edit, and the command
margin.editSelection does the same for clients that cannot resolve a code action's edit."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from margin.lsp import convert, wire
from margin.lsp.server import MarginLanguageServer, answering_failures, parse_params

EDIT_SELECTION_COMMAND = "margin.editSelection"
"""A chosen code action, for clients that cannot resolve a code action's edit."""
REWRITE_KIND = "refactor.rewrite.margin"
FIX_KIND = "quickfix.margin"


def code_action(ls: MarginLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """Margin's actions for a non-empty selection. Nothing is asked of the model here."""
    uri = params.text_document.uri
    diagnostics = params.context.diagnostics
    problems = [convert.diagnostic(d) for d in diagnostics]
    offered = ls.services.selection_edits.offer(uri, convert.range_(params.range), problems)
    file = ls.app.files.get(uri)
    if not offered or file is None:
        return []
    only = params.context.only or []
    lazy = ls.resolves_edits()
    actions = []
    for offer in offered:
        kind = FIX_KIND if offer.kind == "fix" else REWRITE_KIND
        if only and not any(kind == o or kind.startswith(f"{o}.") for o in only):
            continue
        data = wire.SelectionEditData(uri=uri, range=wire.RangeModel.of(offer.range), kind=offer.kind,
                                      fingerprint=file.fingerprint, instruction=offer.instruction)
        if offer.kind == "fix":
            data.diagnostics = [wire.DiagnosticModel.of(problem) for problem in problems]
        action = types.CodeAction(offer.title, kind=kind, data=data.dump(), is_preferred=offer.kind == "comment",
                                  diagnostics=list(diagnostics) if offer.kind == "fix" else None)
        if not lazy:
            action.command = types.Command(title=offer.title, command=EDIT_SELECTION_COMMAND, arguments=[data.dump()])
        actions.append(action)
    return actions


async def _edit_selection(ls: MarginLanguageServer, data: Any, method: str, where: str) -> types.WorkspaceEdit:
    request = parse_params(wire.SelectionEditData, data, method, where)
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
    """The edit, applied through workspace/applyEdit. An edit the editor does not apply is
    answered like margin/applyOps (`applied: false` and why) and shown to the user, since
    editors do not show what a command returns."""
    edit = await _edit_selection(ls, arguments[0] if arguments else None, EDIT_SELECTION_COMMAND, "arguments.0")
    failure = await ls.apply_edit(edit)
    if failure:
        ls.tell_user(f"Margin: {failure}", types.MessageType.Warning)
        return wire.EditSelectionResult(applied=False, failure_reason=failure).dump()
    return wire.EditSelectionResult(applied=True).dump()


def register(server: MarginLanguageServer) -> None:
    server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[FIX_KIND, REWRITE_KIND], resolve_provider=True))(code_action)
    server.feature(types.CODE_ACTION_RESOLVE)(resolve_code_action)
    server.command(EDIT_SELECTION_COMMAND)(edit_selection_command)
