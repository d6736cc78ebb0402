"""Selection edits: the code actions Margin offers on a non-empty selection, and the `edit`
profile's rewrite of the selection when one is chosen.

Offering is instant and calls no model: the presets from settings, "Fix with Margin" when the
request carries diagnostics, and the user's own `margin: ...` comment. The model is called only
when an action is chosen (`codeAction/resolve`). Its answer becomes an edit of the exact text
it saw, guarded like applying edit-ops: if the document changed while the model worked, the
edit is rebased when the change lies clear of it, and refused otherwise. A selection edit is
one-shot: it does not use or change the chat threads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from margin.core.assemble import PER_MESSAGE_OVERHEAD
from margin.core.budget import BudgetReport, SystemPromptTooLarge, Window
from margin.core.completion import junk
from margin.core.editops import ApplyPlan, OffsetEdit, plan_apply
from margin.core.llm import ProviderError
from margin.core.selection_edit import (
    Diagnostic,
    EditInput,
    SelectionReply,
    assemble_edit,
    edit_region,
    find_instruction,
    fit_replacement,
    fix_instruction,
    fixed_texts,
)
from margin.core.tokens.counter import fewest_tokens
from margin.core.vfs import Position, Range, VirtualFile
from margin.services.app import MarginApp
from margin.services.background import REQUEST
from margin.services.errors import RequestError
from margin.services.instructions import InstructionFiles
from margin.services.profile import resolve_profile, snapshot
from margin.services.structured import ask_json, fit_prompt, framing_tokens, sync_count

log = logging.getLogger(__name__)

PROFILE = "edit"
CONTEXT_CHARS_PER_TOKEN = 12
"""The code around a selection is read at most this many characters per token of the limit on
each side: more could never fit, so it is never counted."""

ActionKind = Literal["preset", "fix", "comment"]


class SelectionEditError(RequestError):
    """A selection edit that cannot be made; the message is for a person."""


@dataclass(frozen=True)
class SelectionEditRequest:
    uri: str
    range: Range
    """what it rewrites: the selection, or for a fix at the cursor the lines the diagnostics cover"""
    kind: ActionKind
    instruction: str = ""
    """for presets; a fix's comes from its diagnostics, a comment's from the comment"""
    diagnostics: Sequence[Diagnostic] = ()
    """for a fix: the problems to fix"""
    fingerprint: str | None = None
    """the text the action was offered on; None: whatever the document holds now"""


@dataclass(frozen=True)
class OfferedAction:
    title: str
    request: SelectionEditRequest
    """what choosing it asks: the edit of the text it was offered on"""


@dataclass
class SelectionEditOutcome:
    base: VirtualFile
    """the text the model saw"""
    current: VirtualFile
    plan: ApplyPlan
    """the edit on the current text (rebased if the document changed clear of it)"""
    budget: BudgetReport


def _title(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass
class SelectionEditService:
    app: MarginApp
    instructions: InstructionFiles | None = None
    """the project's instruction files (None: none are shown)"""

    def offer(self, uri: str, selection: Range, diagnostics: Sequence[Diagnostic]) -> list[OfferedAction]:
        """The actions for a selection; at a cursor, only "Fix with Margin" (on the lines the
        diagnostics cover). None when the file is unknown or the edit profile is off. Each
        carries the request choosing it makes, of the text it is offered on."""
        file = self.app.files.get(uri)
        settings = self.app.settings.current
        if file is None or not settings.profile(PROFILE).enabled:
            return []

        def action(title: str, kind: ActionKind, range_: Range = selection, instruction: str = "") -> OfferedAction:
            problems = diagnostics if kind == "fix" else ()
            return OfferedAction(title, SelectionEditRequest(uri, range_, kind, instruction, problems, file.fingerprint))

        start, end = self._offsets(file, selection)
        if start == end:
            if not diagnostics:
                return []
            first = min(d.line for d in diagnostics)
            last = max(d.line if d.end_line is None else d.end_line for d in diagnostics)
            end_of_lines = (Position(last + 1, 0) if last + 1 < file.line_count
                            else file.position_at(len(file.text), self.app.files.encoding))
            if end_of_lines == Position(first, 0):
                return []
            return [action("Fix with Margin", "fix", Range(Position(first, 0), end_of_lines))]
        actions = []
        comment = find_instruction(file.text, start, end)
        if comment is not None:
            actions.append(action(f"Margin: {_title(comment.text)}", "comment"))
        if diagnostics:
            actions.append(action("Fix with Margin", "fix"))
        actions += [action(f"Margin: {p.title}", "preset", instruction=p.instruction)
                    for p in settings.globals.code_actions]
        return actions

    def _offsets(self, file: VirtualFile, selection: Range) -> tuple[int, int]:
        encoding = self.app.files.encoding
        start, end = file.offset_at(selection.start, encoding), file.offset_at(selection.end, encoding)
        return min(start, end), max(start, end)

    async def propose(self, request: SelectionEditRequest) -> SelectionEditOutcome:
        async with self.app.queue.foreground(REQUEST):  # before summaries and indexing (services.background)
            return await self._propose(request)

    async def _propose(self, request: SelectionEditRequest) -> SelectionEditOutcome:
        app = self.app
        settings = snapshot(app, PROFILE)
        if not settings.enabled:
            raise SelectionEditError("Selection edits are turned off: set edit.enabled to true to use them.")
        base = app.files.get(request.uri)
        file_id = app.workspace.file_id(request.uri)
        if base is None:
            raise SelectionEditError(f"{file_id} is not open in the editor any more.")
        if request.fingerprint is not None and base.fingerprint != request.fingerprint:
            raise SelectionEditError(f"{file_id} changed after the action was offered: select the code "
                                     "and choose the action again.")
        start, end = self._offsets(base, request.range)
        if start == end:
            raise SelectionEditError("Select the code to change first.")
        comment = find_instruction(base.text, start, end) if request.kind == "comment" else None
        if request.kind == "comment" and comment is None:
            raise SelectionEditError("There is no `margin: ...` comment above or inside the selection any more.")
        instruction = (comment.text if comment is not None
                       else fix_instruction(request.diagnostics) if request.kind == "fix"
                       else request.instruction)
        region = edit_region(base.text, start, end, comment)
        profile = await resolve_profile(app, PROFILE, settings)
        window, counter = profile.window, profile.counter
        if (fewest := fewest_tokens(region.shown)) > window:  # never counted: it cannot fit
            raise SelectionEditError(
                f"Too large to send: the selection is {len(region.shown):,} characters, at least {fewest:,} tokens "
                f"with any tokenizer, and the edit profile's context window is {window:,} tokens. Select less code, "
                "or use a model with a larger window for the edit profile.")
        reach = max(window - profile.max_output_tokens, 0) * CONTEXT_CHARS_PER_TOKEN
        before = base.text[: region.start]
        if len(before) > reach:  # from the first whole line within reach
            cut = before.find("\n", len(before) - reach)
            before = before[cut + 1:] if cut >= 0 else ""
        after = base.text[region.end:]
        after = after[: after.rfind("\n", 0, reach) + 1] if len(after) > reach else after
        tokenizer = counter.name  # before: a server found not to count renames its counter
        try:  # only the tokenizer is asked anything before the model call
            found = await self.instructions.for_prompt(request.uri, counter) if self.instructions else None
            edit = EditInput(profile.system, profile.optional_system, file_id, base.language_id, before,
                             region.shown, after, instruction, found.files if found else (), found.cut if found else ())
            count = await sync_count(counter, fixed_texts(edit), [edit.before, edit.after])
            framing = await framing_tokens(counter)
            assembly, counted = await fit_prompt(
                lambda room: assemble_edit(edit, count, Window(room, profile.max_output_tokens, counter.name,
                                                               counter.exact, framing),
                                           message_overhead=PER_MESSAGE_OVERHEAD),
                counter, window, counts=True)
        except SystemPromptTooLarge as error:
            raise SelectionEditError(str(error)) from None
        except ProviderError as error:
            raise SelectionEditError(f"Could not count tokens with {tokenizer}: {error}") from None
        budget = assembly.plan.report(counted)
        if assembly.over_budget:
            raise SelectionEditError(f"{assembly.over_budget} Select less code, or use a model with a "
                                     "larger window for the edit profile.")

        started = time.perf_counter()
        answer = await ask_json(profile, assembly.messages, SelectionReply, schema_name="margin_selection_edit",
                                described_as="the selection-edit schema", smaller="select less code",
                                retry="Try again.")
        fitted = fit_replacement(answer.replacement, region.shown, base.text)
        own = "\n".join([edit.system, *(text for _, text in edit.optional_system)])
        if junk.echoes_instructions(fitted, own, allowed=base.text + "\n" + instruction):
            log.info("selection edit refused kind=%s chars_out=%d silence=instructions", request.kind, len(fitted))
            raise SelectionEditError("The model answered with its own instructions, not code: nothing was "
                                     "changed. Try again, or use a larger model for the edit profile.")
        if base.text[region.start:region.end] == fitted:
            raise SelectionEditError("The model proposed no change.")

        current = app.files.get(request.uri)
        plan = plan_apply({request.uri: [OffsetEdit(region.start, region.end, fitted, 0)]},
                          {request.uri: base.text}, {request.uri: current.text} if current else {})
        log.info("selection edit proposed kind=%s chars_in=%d chars_out=%d prompt_tokens=%d rebased=%s "
                 "stale=%s ms=%.0f", request.kind, region.end - region.start, len(fitted), counted,
                 plan.rebased, bool(plan.stale), (time.perf_counter() - started) * 1000)
        if plan.stale or current is None:
            raise SelectionEditError(f"Not applied: {file_id} changed where the edit goes while Margin was "
                                     "working. Choose the action again.")
        return SelectionEditOutcome(base, current, plan, budget)
