"""Margin's LSP handlers, one module per feature; each registers its own handlers.

    lifecycle      initialize, initialized, settings (didChangeConfiguration), shutdown
    documents      didOpen, didChange, didClose: the virtual files
    chat           margin/chat, margin/explain, and the threads: history, threads, newThread,
                   deleteThread
    editops        margin/editOps, margin/applyOps and the margin.applyOps command
    code_actions   textDocument/codeAction, codeAction/resolve, the margin.editSelection command
    status         margin/status
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from margin.lsp.server import MarginLanguageServer


def register_all(server: MarginLanguageServer) -> None:
    from margin.lsp.handlers import chat, code_actions, documents, editops, lifecycle, status

    for module in (lifecycle, documents, chat, editops, code_actions, status):
        module.register(server)
