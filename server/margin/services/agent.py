"""The agent: a task done in steps, each one budgeted prompt, one model answer and the calls it
makes, in an ordinary Margin thread (context `agent`: history, recall, threads and delete work
on it). The doors — the language server, the terminal — give it a `Door`: how the person is
shown each step, asked to confirm, and how an edit reaches the file.

Every step:
- the prompt is fitted to the window the server serves (core.agent.steps: old results as
  pointers, then older steps left out), counted exactly; a prompt that cannot fit is never sent;
- the answer is read by the model's action protocol (core.agent.actions): calls, a final answer,
  or rejections told back to the model — nothing is dropped silently;
- each call runs: reads at once; an `edit` or a `run` only once confirmed (Approvals), within the
  confirmation deadline (expiry is a no); an edit only onto the text the model read (core.agent.
  edits), re-checked against the live buffer or the disk as it is applied;
- the step is stored whole before the next begins, so a cancelled or failed turn keeps the steps
  that completed;
- the stuck rules (core.agent.stuck) and the step cap and the turn's deadline end a turn that
  goes nowhere, saying why.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from margin.core.agent import steps as agent_steps
from margin.core.agent import tools as agent_tools
from margin.core.agent.actions import Read, read_answer
from margin.core.agent.approvals import Approval, Approvals
from margin.core.agent.ports import Hands
from margin.core.agent.steps import Entry, Result, Step, StoredMessage, Task
from margin.core.agent.stuck import is_small, repeated_note, step_cap
from margin.core.budget import safety_margin
from margin.core.llm import ChatMessage, ContextTooLarge, ProviderError, ToolCall, ToolCalls, Usage, joined
from margin.core.settings import ProfileSettings
from margin.core.threads import NewMessage, Thread
from margin.core.tokens.counter import fewest_tokens
from margin.core.where import Where
from margin.services import agent_prompt
from margin.services.agent_calls import AgentCalls
from margin.services.agent_reads import WorkspaceReads
from margin.services.agent_turn import (
    NO_DOOR,
    AgentAsk,
    AgentExplained,
    AgentOutcome,
    Confirm,
    Decision,
    Door,
    EditAnswer,
    ProposedEdit,
    StepReport,
    Stop,
    Turn,
)
from margin.services.app import MarginApp
from margin.services.background import REQUEST
from margin.services.errors import RequestError
from margin.services.mcp import McpHub
from margin.services.profile import resolve_profile, snapshot
from margin.services.retrieval import Retrieval
from margin.services.threads import DISPLAY, ThreadsService
from margin.services.turn import ThreadGuard

log = logging.getLogger(__name__)

PROFILE = "agent"
CONTEXT = "agent"
"""the context of an agent thread (chat's are `chat`)"""

class AgentService:
    def __init__(self, app: MarginApp, threads: ThreadsService, guard: ThreadGuard, retrieval: Retrieval | None,
                 hands: Hands | None, mcp: McpHub) -> None:
        self.app = app
        self.threads = threads
        self.guard = guard
        self.calls = AgentCalls(app, retrieval, hands, mcp)
        self.approvals: dict[str, Approvals] = {}
        """each thread's approvals ("Always in this thread"), for as long as the server runs"""

    def _approvals(self, thread_id: str, patterns: tuple[str, ...]) -> Approvals:
        """The thread's approvals, with the person's run patterns as they are now."""
        approvals = self.approvals.setdefault(thread_id, Approvals()) if thread_id else Approvals()
        approvals.patterns = patterns
        return approvals

    async def approved(self, thread_id: str, revoke: Sequence[tuple[str, str]] = ()) -> tuple[list[Approval], tuple[str, ...]]:
        """The thread's "Always in this thread" approvals (each revoked first, when named as
        (tool, canonical arguments)), and the run patterns that apply to every thread."""
        thread = await self.threads.thread_for(Where(thread_id=thread_id))
        approvals = self._approvals(thread.id, self.app.settings.current.globals.agent_run_patterns)
        for tool, args in revoke:
            approvals.revoke(Approval(tool, args))
        return list(approvals.always), tuple(approvals.patterns)

    @property
    def diagnostics(self) -> dict[str, list[dict[str, Any]]]:
        """the problems the editor reports, by document URI (margin/diagnostics)"""
        return self.calls.diagnostics

    def problems_reported(self, uri: str, problems: list[dict[str, Any]]) -> None:
        """The editor's problems in a document now (margin/diagnostics), kept by its URI as the
        agent names files (percent-escapes undone: editors escape differently)."""
        self.calls.diagnostics[unquote(uri)] = problems

    # --- the thread ----------------------------------------------------------------------------

    async def _thread(self, ask: AgentAsk, make: bool = True) -> Thread | None:
        """The agent thread named, else a new one (`make`: made now; else None)."""
        where = ask.where
        if where.thread_id:
            thread = await self.threads.thread_for(where)
            if thread.context != CONTEXT:
                raise RequestError(f"Thread {thread.id} is a chat thread: an agent task goes to an agent thread "
                                   "(leave threadId out to start one).")
            return thread
        if not make:
            return None
        workspace = ask.folder or self.app.workspace.folder_of(where.text_document)
        title = " ".join(ask.task.split())[:60]
        return await self.app.storage.run(lambda store: store.new_thread(workspace, CONTEXT, title))

    async def _entries(self, thread: Thread) -> list[Entry]:
        stored = await self.threads.timeline(thread.id)
        return agent_steps.entries_of([StoredMessage(m.role, m.content, m.kind, m.meta, next(iter(m.tokens.values()), 0))
                                       for m in stored])

    # --- the turn ------------------------------------------------------------------------------

    async def run(self, ask: AgentAsk, door: Door) -> AgentOutcome:
        settings = self._settings(ask)
        thread = await self._thread(ask)
        assert thread is not None
        self.guard.acquire(thread.id)
        try:
            return await self._turn(await self._open(ask, settings, thread, door))
        finally:
            self.guard.release(thread.id)

    def _settings(self, ask: AgentAsk) -> ProfileSettings:
        settings = snapshot(self.app, PROFILE)
        if not settings.enabled:
            raise RequestError(f"The {PROFILE} profile is disabled (set {PROFILE}.enabled to true).")
        if not ask.task.strip():
            raise RequestError("Say what the agent should do: the task is empty.")
        if ask.model:  # another model of the same server (ACP's model choice)
            settings = settings.model_copy(update={"model": ask.model})
        return settings

    async def _open(self, ask: AgentAsk, settings: ProfileSettings, thread: Thread | None, door: Door) -> Turn:
        """The turn before its first step (`thread` None: a new thread, not yet made)."""
        profile = await resolve_profile(self.app, PROFILE, settings)
        info = await self.app.backends.probe(PROFILE, settings)
        protocol, source = self.app.backends.agent_protocol(settings, info)
        folder = ask.folder or self.app.workspace.folder_of(ask.where.text_document)
        globals_ = self.app.settings.current.globals
        entries = await self._entries(thread) if thread is not None else []
        thread = thread or Thread("", folder, CONTEXT, 0.0, 0.0)
        turn = Turn(ask, thread, profile, protocol, WorkspaceReads(self.app, folder),
                    self.app.workspace.root_of(folder or None), door, entries,
                    self._approvals(thread.id, globals_.agent_run_patterns),
                    time.monotonic() + globals_.agent_turn_timeout_s)
        turn.outcome = AgentOutcome(thread.id, "", "finished", "", protocol, source, window=profile.window,
                                    limit=max(0, profile.window - profile.max_output_tokens
                                              - safety_margin(profile.window, profile.counter.exact)))
        turn.model = settings.model or (info.models[0] if info.models else None)
        turn.grammar = info.kind in ("llama.cpp", "vllm")
        if is_small(turn.model):  # whole lines by number: a small model rarely copies text exactly
            turn.tools = agent_tools.SMALL_TOOLS
        if info.silent_cut:  # Ollama: the window it serves is all there is, whatever was set
            turn.served_note = (f" The server runs this model with a {profile.window:,}-token window and cuts longer "
                                "prompts silently: give it a larger one (Ollama: OLLAMA_CONTEXT_LENGTH, or num_ctx "
                                "in the model's Modelfile).")
        await self.calls.mcp.offer(turn, None if door is NO_DOOR else door)  # the person's MCP tools
        turn.outcome.tools_tokens = await agent_prompt.tools_tokens(turn)
        return turn

    async def explain(self, ask: AgentAsk) -> AgentExplained:
        """The first step's prompt for `ask` (the next step's, in a thread named), and its budget,
        without calling a model."""
        settings = self._settings(ask)
        thread = await self._thread(ask, make=False)
        turn = await self._open(ask, settings, thread, NO_DOOR)
        out = turn.outcome
        assert out is not None
        turn.task_text = agent_prompt.task_text(self.app.workspace, ask)
        turn.entries.append(Task(turn.task_text))
        fitted = await agent_prompt.fit(turn)
        messages, counted, shape = fitted if fitted is not None else ([], 0, None)
        report = await agent_prompt.report(turn, counted, shape)
        over = None if fitted is not None else "The prompt cannot fit the model's window even with every result as a pointer."
        return AgentExplained(thread.id if thread is not None else "", messages, report, [t.name for t in turn.tools],
                              out.protocol, over)

    async def _turn(self, turn: Turn) -> AgentOutcome:
        out = turn.outcome
        assert out is not None
        counter = turn.profile.counter
        task = turn.task_text = agent_prompt.task_text(self.app.workspace, turn.ask)
        if fewest_tokens(task) > out.limit:
            return self._stopped(out, "over budget", f"The task is {len(task):,} characters, more than the "
                                 f"{out.limit:,} tokens a prompt may take with this model: shorten it.")
        fixed = await counter.count_chat([ChatMessage("system", agent_prompt.system(turn, pointers=True)),
                                          ChatMessage("user", f"Task: {task}")], agent_prompt.tools(turn))
        if fixed > out.limit:
            return self._stopped(out, "over budget", f"The task and the agent's instructions and tools take {fixed:,} "
                                 f"tokens, more than the {out.limit:,} a prompt may take with this model "
                                 f"(window {out.window:,}): shorten the task or use a model with a larger window."
                                 + turn.served_note)
        turn.result_limit = max(256, (out.limit - fixed) // 3)
        await self._store(turn.thread, [NewMessage("user", task, meta={DISPLAY: turn.ask.task, agent_steps.AGENT: {"task": True}},
                                                   tokens={counter.name: (await counter.count_texts([task]))[0]})])
        turn.entries.append(Task(task))
        cap = step_cap(turn.model)
        first = agent_steps.last_step(turn.entries) + 1
        log.info("agent turn thread=%s protocol=%s cap=%d window=%d", turn.thread.id, turn.protocol, cap, out.window)
        for number in range(first, first + cap):
            if time.monotonic() > turn.deadline:
                return await self._ended(turn, "deadline", "The turn took longer than agentTurnTimeoutS; its steps are kept.")
            ended = await self._step(turn, number)
            if ended is not None:
                return ended
        return await self._ended(turn, "step cap", f"The turn reached its cap of {cap} steps for this model "
                                 "without finishing; its steps are kept. Ask again to go on.")

    async def _step(self, turn: Turn, number: int) -> AgentOutcome | None:
        out = turn.outcome
        assert out is not None
        report = StepReport(number)
        out.steps.append(report)
        fitted = await agent_prompt.fit(turn)
        if fitted is None:
            return await self._ended(turn, "over budget", "The next step's prompt cannot fit the model's window even "
                                     "with every earlier result shown as a pointer; the steps are kept." + turn.served_note)
        messages, report.prompt_tokens, shape = fitted
        out.budget = await agent_prompt.report(turn, report.prompt_tokens, shape)
        await self._show(turn, {"kind": "step", "step": number, "promptTokens": report.prompt_tokens,
                                "window": out.window})
        try:
            text, calls, usage = await self._ask_model(turn, messages, number)
        except ContextTooLarge as error:
            log.warning("agent step refused upstream as too large thread=%s step=%d", turn.thread.id, number)
            return await self._ended(turn, "over budget", str(error))
        except ProviderError as error:
            log.warning("agent step failed thread=%s step=%d error=%s", turn.thread.id, number, error.kind)
            return await self._ended(turn, "model failed", f"The model server failed at step {number}: {error}. "
                                     "The steps before it are kept.")
        out.usage = Usage((out.usage.prompt_tokens or 0) + (usage.prompt_tokens or 0),
                          (out.usage.completion_tokens or 0) + (usage.completion_tokens or 0))
        read = read_answer(turn.protocol, text, calls, turn.tools, number)
        return await self._act(turn, number, text, calls, read, report)

    async def _ask_model(self, turn: Turn, messages: Sequence[ChatMessage],
                         number: int) -> tuple[str, tuple[ToolCall, ...], Usage]:
        profile = turn.profile
        tools = agent_prompt.tools(turn)
        request = profile.request(messages, response_format=agent_prompt.format(turn), tools=tools,
                                  tool_choice="auto" if tools else None)
        parts: list[str] = []
        calls = ToolCalls()
        usage = Usage()
        remaining = max(1.0, turn.deadline - time.monotonic())
        async with self.app.queue.foreground(REQUEST):
            async with asyncio.timeout(remaining):
                async for delta in profile.provider.stream(request):
                    if delta.text:
                        parts.append(delta.text)
                        await self._show(turn, {"kind": "text", "step": number, "delta": delta.text})
                    if delta.tool_calls:
                        calls.add(delta.tool_calls)
                    usage = delta.usage or usage
        return joined(parts), calls.calls(), usage

    async def _act(self, turn: Turn, number: int, text: str, native_calls: tuple[ToolCall, ...], read: Read,
                   report: StepReport) -> AgentOutcome | None:
        out = turn.outcome
        assert out is not None
        results: list[Result] = []
        something_new = False
        stop: tuple[Stop, str] | None = None
        # What the model is shown of its own answer: its text; a JSON action as it wrote it.
        answered_ids = {call.id for call in read.calls}
        unanswered = [call for call in native_calls if call.id not in answered_ids]
        for i, rejected in enumerate(read.rejected):
            out.rejected += 1
            out.described += rejected.kind == "described"
            report.told.append({"kind": rejected.kind, "text": rejected.told})
            call_id = unanswered[i].id if turn.protocol == "native" and i < len(unanswered) else None
            results.append(Result(number, rejected.told, "told" if i == 0 else f"told {i + 1}", call_id))
            await self._show(turn, {"kind": "told", "step": number, "rejection": rejected.kind, "text": rejected.told})
        final = read.final
        for call in read.calls:
            if call.tool is agent_tools.FINISH:
                report.calls.append({"tool": call.tool.name, "args": call.args, "status": "done", "pointer": ""})
                if turn.protocol == "native" and native_calls:  # every native call is answered, in a later turn too
                    results.append(Result(number, "The task ended here.", "finish", call.id))
                continue
            await self._show(turn, {"kind": "calling", "step": number, "tool": call.tool.name, "args": call.args})
            status, shown, changed = await self.calls.call(turn, call, number)
            label = agent_steps.label_for(call.tool.name, call.args)
            if any(r.label == label for r in results):
                label = f"{label} #{len(results) + 1}"
            result = Result(number, shown, label, call.id if turn.protocol == "native" and native_calls else None)
            seen = turn.watch.after(call.tool.name, call.args, shown, result.pointer)
            if seen.verdict == "repeated":
                result = Result(number, repeated_note(call.tool.name, seen.first), label, result.call_id)
                status = "repeated"
            elif seen.verdict == "stop":
                stop = ("stuck", f"Stopped: {seen.why}.")
                status = "repeated"
                result = Result(number, repeated_note(call.tool.name, seen.first), label, result.call_id)
            something_new = something_new or changed or seen.verdict == "go on"
            results.append(result)
            report.calls.append({"tool": call.tool.name, "args": call.args, "status": status, "pointer": result.pointer})
            await self._show(turn, {"kind": "call", "step": number, "tool": call.tool.name, "args": call.args,
                                    "status": status, "pointer": result.pointer, "summary": agent_steps.first_line(result.text)})
        counted = await self._counted(turn, results)
        answer = agent_prompt.answer_text(turn, text, read, native_calls)
        step = Step(number, answer, native_calls if turn.protocol == "native" else (), tuple(counted))
        await self._store_step(turn, step, read)
        turn.entries.append(step)
        if final is not None and not read.rejected:
            return await self._ended(turn, "finished", "", final)
        if stop is not None:
            return await self._ended(turn, *stop)
        quiet = turn.watch.step_done(something_new=something_new)
        if quiet.verdict == "stop":
            return await self._ended(turn, "stuck", f"Stopped: {quiet.why}.")
        return None

    async def _counted(self, turn: Turn, results: list[Result]) -> list[Result]:
        """Each result counted, and cut to the share of the window one result may take."""
        counter = turn.profile.counter
        texts = [r.text for r in results]
        known: dict[str, int] = {}
        for text in texts:
            if fewest_tokens(text) > turn.result_limit * 4:
                known[text] = fewest_tokens(text)
        missing = [t for t in texts if t not in known]
        known.update(zip(missing, await counter.count_texts(missing)))
        made = []
        for result in results:
            text, tokens = result.text, known[result.text]
            for _ in range(4):
                if tokens <= turn.result_limit:
                    break
                text = agent_steps.cut_to(text, tokens, turn.result_limit)
                tokens = (await counter.count_texts([text]))[0]
            made.append(Result(result.step, text, result.label, result.call_id, tokens))
        return made

    # --- storing and ending --------------------------------------------------------------------

    async def _store(self, thread: Thread, messages: Sequence[NewMessage]) -> None:
        try:
            await self.app.storage.run(lambda store: store.append(thread.id, messages))
        except KeyError:
            raise RequestError("The thread was deleted while the agent was working; its steps were not kept.") from None

    async def _store_step(self, turn: Turn, step: Step, read: Read) -> None:
        counter = turn.profile.counter
        answer_meta, results = agent_steps.stored_step(step, {"protocol": turn.protocol})
        answer_tokens = (await counter.count_texts([step.answer]))[0]
        messages = [NewMessage("assistant", step.answer, meta=answer_meta, tokens={counter.name: answer_tokens})]
        messages += [NewMessage("tool", text, kind=agent_steps.RESULT, meta=meta, tokens={counter.name: r.tokens})
                     for (text, meta), r in zip(results, step.results)]
        await self._store(turn.thread, messages)

    async def _ended(self, turn: Turn, stopped: Stop, why: str, answer: str = "") -> AgentOutcome:
        out = turn.outcome
        assert out is not None
        out.stopped, out.why = stopped, why
        out.answer = answer if stopped == "finished" else (answer or why)
        counter = turn.profile.counter
        final = out.answer
        await self._store(turn.thread, [NewMessage("assistant", final, meta={agent_steps.AGENT: {"final": True, "stopped": stopped}},
                                                   tokens={counter.name: (await counter.count_texts([final]))[0]})])
        await self._show(turn, {"kind": "final", "answer": final, "stopped": stopped})
        log.info("agent turn ended thread=%s stopped=%s steps=%d edits=%d rejected=%d", turn.thread.id, stopped,
                 len(out.steps), len(out.edits), out.rejected)
        return out

    def _stopped(self, out: AgentOutcome, stopped: Stop, why: str) -> AgentOutcome:
        out.stopped, out.why, out.answer = stopped, why, why
        return out

    async def _show(self, turn: Turn, event: dict[str, Any]) -> None:
        shown = turn.door.show(event)
        if asyncio.iscoroutine(shown):
            await shown


__all__ = ["AgentAsk", "AgentOutcome", "AgentService", "Confirm", "Decision", "Door", "EditAnswer", "ProposedEdit"]

