"""Margin's own LSP methods and commands, each declared once: its name, a request or a command,
the wire models of its params and result, and what it is for. The handlers register and parse
by these, `initialize` advertises the requests (lsp/protocol.py reads them from here),
and scripts/generate_protocol.py writes docs/protocol.md, a JSON schema per method and
the VS Code client's types from them.

Cheap to import (answering `initialize` needs the names): a model is named as
`module:Class` under margin.lsp and imported on first use.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["request", "command", "standard", "notification"]


@dataclass(frozen=True)
class Method:
    name: str
    params: str
    """the params model (a command's: of its first argument), `module:Class` under margin.lsp"""
    result: str
    """the result model, `module:Class` under margin.lsp"""
    doc: str
    """what it does, in one line"""
    use: str
    """when a client uses it, and what to know doing so"""
    errors: str = ""
    """the errors it answers besides InvalidParams (every method's, naming each bad field and
    the rule it breaks)"""
    kind: Kind = "request"
    """request: Margin's own; command: workspace/executeCommand; standard: an LSP method whose
    params Margin reads with a model of its own; notification: Margin's own, from the client,
    with no answer"""
    partial: str | None = None
    """the model of each partial result ($/progress on the request's partialResultToken)"""

    def params_model(self) -> Any:
        return _model(self.params)

    def result_model(self) -> Any:
        return _model(self.result)

    def partial_model(self) -> Any:
        return _model(self.partial) if self.partial else None


def _model(where: str) -> Any:
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(f"margin.lsp.{module}"), name)


_BUSY = ("RequestFailed when another chat or edit-ops request is running in the thread, the thread "
         "named does not exist, the profile is disabled or has no template, or the model server "
         "fails; RequestCancelled when the client cancels it ($/cancelRequest, or the work-done "
         "progress' cancel button), the thread left unchanged.")

STATUS = Method(
    "margin/status", "wire_status:StatusParams", "wire_status:StatusResult",
    "The version, the position encoding, each profile as it would run now, the open files and "
    "the work running in the background.",
    "For a status bar or a health check: whether each profile's backend answers, its model, "
    "context window and tokenizer. Backend probes are cached for 30 s; `refresh: true` probes "
    "again.")
CHAT = Method(
    "margin/chat", "wire:ChatRequestParams", "wire:ChatResult",
    "Ask the chat profile; the reply streams as partial results and the thread keeps the turn.",
    "The chat panel's request. The active document, selection and `files` are the context; "
    "without `threadId` the request goes to the workspace folder's current thread. Each partial "
    "result is the reply's next piece; the result holds the whole reply and the budget report. "
    "When the prompt cannot fit the budget nothing is sent: `reply` is empty and `message` says "
    "why.",
    _BUSY, partial="wire:ChatDelta")
EXPLAIN = Method(
    "margin/explain", "wire:ExplainParams", "wire:ExplainResult",
    "What a request would send, message by message, with its budget report; no model is called.",
    "To show a person what Margin would send and what it costs: the same params as margin/chat, "
    "and `profile` to explain another profile's prompt (`chatOps` for margin/editOps).",
    "RequestFailed when the thread named does not exist, the profile's template cannot be loaded "
    "or the tokenizer fails.")
HISTORY = Method(
    "margin/history", "wire:HistoryParams", "wire:HistoryResult",
    "A thread's messages a person sees, oldest first (never the hidden ones).",
    "To show a thread when the chat panel opens: by `threadId`, else the document's workspace "
    "folder's current thread. `content` is what the user typed, not the prompt built from it.",
    "RequestFailed when the thread named does not exist.")
RECALL = Method(
    "margin/recall", "wire:RecallParams", "wire:RecallResult",
    "Exactly what a pointer such as `[t42 parser.py]` stood for when it was shown.",
    "Prompts show older file contents and replies as pointers; this shows one in full, and for a "
    "file whether it has changed since.",
    "RequestFailed when the thread does not exist or nothing in it is that pointer.")
THREADS = Method(
    "margin/threads", "wire:ThreadsParams", "wire:ThreadsResult",
    "The conversation threads of a workspace folder, or of every workspace.",
    "To offer a list of threads to continue; `persistent: false` means the thread database "
    "cannot be used and threads last until Margin stops.")
NEW_THREAD = Method(
    "margin/newThread", "wire:NewThreadParams", "wire:NewThreadResult",
    "A new thread for the document's workspace folder, its current thread from now on.",
    "The chat panel's \"New thread\": later requests from that folder without `threadId` go to "
    "it.")
DELETE_THREAD = Method(
    "margin/deleteThread", "wire:DeleteThreadParams", "wire:DeleteThreadResult",
    "Delete a thread and its messages.",
    "`deleted: false` when there was no such thread (deleted already, or expired).")
REMEMBER = Method(
    "margin/remember", "wire_memories:RememberParams", "wire_memories:RememberResult",
    "Pin a fact for Margin to keep in mind, in the document's workspace folder or everywhere.",
    "Memories are in every chat and edit-ops prompt of their scope. The text is stripped and "
    "checked by the same rules as the terminal's `margin remember`.",
    "RequestFailed for a workspace memory when there is no workspace folder.")
FORGET = Method(
    "margin/forget", "wire_memories:ForgetParams", "wire_memories:ForgetResult",
    "Forget a memory by its id.",
    "`removed: false` when there was no such memory.")
MEMORIES = Method(
    "margin/memories", "wire_memories:MemoriesParams", "wire_memories:MemoriesResult",
    "The memories a document's workspace folder sees (its own and the global ones), newest first.",
    "To list memories with a way to forget each.")
EDIT_OPS = Method(
    "margin/editOps", "wire:ChatRequestParams", "wire_edits:EditOpsResult",
    "Ask the chatOps profile for a change as edit-ops, with a versioned WorkspaceEdit to preview.",
    "Show `edit` as a diff; apply only through margin/applyOps (or the margin.applyOps command) "
    "with the `ops` and `baseFingerprints` given, which checks that each file is still the text "
    "the model saw. `enabled: false` when the chatOps profile is off; a model answer that is not "
    "valid ops, or a request that cannot be served (a busy thread, an over-budget prompt), comes "
    "back as `assistantMessage` with no ops, not as an error.")
APPLY_OPS = Method(
    "margin/applyOps", "wire_edits:ApplyOpsParams", "wire_edits:ApplyOpsResult",
    "Apply edit-ops if each file is still the text the model saw, rebased exactly if the document "
    "changed clear of them, else refused.",
    "Applied through workspace/applyEdit. A refusal is a result, not an error: `applied: false`, "
    "the files that changed where the ops go in `staleFiles`, or `failureReason` (the editor "
    "refused the edit, or an op no longer applies).")

APPLY_OPS_COMMAND = Method(
    "margin.applyOps", "wire_edits:ApplyOpsParams", "wire_edits:ApplyOpsResult",
    "margin/applyOps as a command, for clients that run commands but send no custom requests.",
    "Its one argument is margin/applyOps' params; it answers the same.", kind="command")
EDIT_SELECTION_COMMAND = Method(
    "margin.editSelection", "wire_edits:SelectionEditData", "wire_edits:EditSelectionResult",
    "A Margin code action, chosen: the edit profile asked, its edit applied.",
    "textDocument/codeAction offers Margin's actions on a selection with this as their `data`; a "
    "client that resolves code actions gets the edit from codeAction/resolve, others run this "
    "command with the same `data` as its argument. It answers when the model is done, or after "
    "5 s with `pending: true`: the edit is then applied when the model is done, and a failure is "
    "shown to the user.",
    "RequestFailed when the model's answer is not an edit, the profile is disabled, or the model "
    "server fails.", kind="command")

INLINE_COMPLETION = Method(
    "textDocument/inlineCompletion", "wire_completion:InlineCompletionRequestParams",
    "wire_completion:InlineCompletionListModel",
    "The completion profile's suggestion at the cursor (LSP 3.18).",
    "Standard params, and `textDocument.version` when the client sends it: an answer for an older "
    "version is empty. No suggestion is an empty list, never an error (the reason is logged).",
    kind="standard")

NEXT_EDIT = Method(
    "margin/nextEdit", "wire_next_edit:NextEditParams", "wire_next_edit:NextEditResult",
    "The nextEdit profile's suggestion: the edit the user's recent edits call for in the window "
    "around the cursor, or none.",
    "After a pause in typing, with the document's version: an answer for an older version is "
    "empty. `edits` are the smallest edits of the document at that version; `jumpTo` is where the "
    "first starts (Tab goes there, Tab again accepts). No suggestion is an empty `edits`, with "
    "`reason`. The nextEdit profile is off until turned on (docs/next-edit.md).",
    "RequestFailed when the document is not open, or the line is past its end.")
COPILOT_INLINE_EDIT = Method(
    "textDocument/copilotInlineEdit", "wire_next_edit:NextEditParams", "wire_next_edit:CopilotInlineEditResult",
    "margin/nextEdit's answer in the shape the Copilot language server documents.",
    "For editors' existing next-edit interfaces (Neovim's copilot-lsp): the same suggestion as one "
    "edit, `text` replacing `range` in the document at `textDocument.version`; none is an empty "
    "`edits`.",
    "RequestFailed when the document is not open, or the line is past its end.", kind="standard")

AGENT = Method(
    "margin/agent", "wire_agent:AgentParams", "wire_agent:AgentResult",
    "Give the agent a task: it reads, searches, edits and runs commands in steps, asking before "
    "any edit or command; each step streams as partial results and the agent thread keeps it.",
    "Params like margin/chat's, with `task`. The agent works in the active document's workspace "
    "folder, in a new agent thread unless `threadId` names one. Edits come as workspace/applyEdit "
    "on the version the model read (marked needsConfirmation where the client supports change "
    "annotations, else after window/showMessageRequest); commands are asked with "
    "window/showMessageRequest. No answer within agentConfirmTimeoutS is a no. Cancelling stops "
    "the turn; the steps that completed stay in the thread. `stopped` says how the turn ended.",
    "RequestFailed when another request is running in the thread, the thread named is not an "
    "agent thread, or the agent profile is disabled; RequestCancelled when the client cancels it, "
    "the completed steps kept.", partial="wire_agent:AgentEvent")
APPROVALS = Method(
    "margin/approvals", "wire_agent:ApprovalsParams", "wire_agent:ApprovalsResult",
    "What the agent may do without asking in an agent thread, and revoking it.",
    "For a list of the thread's \"Always in this thread\" approvals (each a tool and its exact "
    "arguments) with a way to revoke each: `revoke` names the ones to forget. `patterns` are the "
    "person's agentRunPatterns, which apply everywhere and change only in user settings.",
    "RequestFailed when the thread does not exist.")
DIAGNOSTICS = Method(
    "margin/diagnostics", "wire_agent:DiagnosticsParams", "wire_agent:NoResult",
    "The problems the editor shows in a document, for the agent's `diagnostics` tool.",
    "A notification, sent whenever a document's problems change (the VS Code extension and the "
    "Neovim module send it): every problem the editor shows in it now.", kind="notification")

REQUESTS: tuple[Method, ...] = (STATUS, CHAT, EXPLAIN, HISTORY, RECALL, THREADS, NEW_THREAD, DELETE_THREAD,
                                REMEMBER, FORGET, MEMORIES, EDIT_OPS, APPLY_OPS, NEXT_EDIT, AGENT, APPROVALS)
"""Margin's own requests, in the order `initialize` advertises them."""
COMMANDS: tuple[Method, ...] = (APPLY_OPS_COMMAND, EDIT_SELECTION_COMMAND)
STANDARD: tuple[Method, ...] = (INLINE_COMPLETION, COPILOT_INLINE_EDIT)
NOTIFICATIONS: tuple[Method, ...] = (DIAGNOSTICS,)
ALL: tuple[Method, ...] = REQUESTS + COMMANDS + STANDARD + NOTIFICATIONS


def request_names() -> list[str]:
    """The requests `initialize` advertises under capabilities.experimental.margin.methods."""
    return [method.name for method in REQUESTS]
