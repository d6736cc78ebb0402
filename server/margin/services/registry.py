"""Every use case over one app: what the language server and the terminal call."""

from __future__ import annotations

from dataclasses import dataclass

from margin.core.next_edit.history import EditHistories
from margin.services.agent import AgentService
from margin.services.app import MarginApp
from margin.services.chat import ChatService
from margin.services.completion import CompletionService
from margin.services.editops import EditOpsService
from margin.services.instructions import InstructionFiles
from margin.services.mcp import McpHub
from margin.services.memories import MemoriesService
from margin.services.next_edit import NextEditService
from margin.services.retrieval import Retrieval
from margin.services.selection_edit import SelectionEditService
from margin.services.summaries import Summaries
from margin.services.threads import ThreadsService


@dataclass
class Services:
    app: MarginApp
    threads: ThreadsService
    chat: ChatService
    editops: EditOpsService
    selection_edits: SelectionEditService
    completion: CompletionService
    memories: MemoriesService
    retrieval: Retrieval
    next_edit: NextEditService
    agent: AgentService
    mcp: McpHub

    @classmethod
    def over(cls, app: MarginApp) -> Services:
        threads, memories, retrieval = ThreadsService(app), MemoriesService(app), Retrieval(app)
        instructions = InstructionFiles(app)
        chat = ChatService(app, threads, summaries=Summaries(app, threads), instructions=instructions,
                           memories=memories, retrieval=retrieval)
        mcp = McpHub(app, app.mcp_connector, app.mcp_missing, app.mcp_approvals_path)
        app.closers.append(mcp.stop)
        return cls(app, threads, chat, EditOpsService(chat), SelectionEditService(app, instructions),
                   CompletionService(app), memories, retrieval, NextEditService(app, EditHistories()),
                   AgentService(app, threads, chat.guard, retrieval, app.hands, mcp), mcp)
