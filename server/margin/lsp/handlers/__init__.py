"""Margin's LSP handlers, one module per feature; each registers its own handlers.

    lifecycle      initialize, initialized, settings (didChangeConfiguration), shutdown
    documents      didOpen, didChange, didClose: the virtual files
    chat           margin/chat, margin/explain, and the threads: history, threads, newThread,
                   deleteThread
    memories       margin/remember, margin/forget, margin/memories
    editops        margin/editOps, margin/applyOps and the margin.applyOps command
    code_actions   textDocument/codeAction, codeAction/resolve, the margin.editSelection command
    completion     textDocument/inlineCompletion, and textDocument/completion when
                   `completionMenu` is on
    status         margin/status
    next_edit      margin/nextEdit, textDocument/copilotInlineEdit, and the edit history
    agent          margin/agent, margin/diagnostics
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from margin.lsp.server import MarginLanguageServer

FEATURES = ("lifecycle", "documents", "chat", "memories", "editops", "code_actions", "completion", "status",
            "next_edit", "agent")
"""Every module of this folder, in the order they register (which orders the advertised
commands); a test checks that none is missing."""


def register_all(server: MarginLanguageServer) -> None:
    for name in FEATURES:
        importlib.import_module(f"{__name__}.{name}").register(server)
