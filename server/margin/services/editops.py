"""Edit-ops: the chatOps profile proposes structured edits on the files it was shown.

The request shares the chat thread and its busy guard. The model is asked for JSON only,
with the schema sent as `response_format` (llama.cpp and OpenAI constrain the output to it).
Whatever goes wrong — profile disabled, over budget, an upstream error, an answer cut off at
maxOutputTokens, invalid JSON, a schema violation, an op that does not fit the text — the
outcome is `ops: []` with a message a person can act on, and the thread is left as it was.
On success the turn is stored, and the exact texts the model saw are kept for applying later.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from margin.core.budget import BudgetReport
from margin.core.editops import Anchor, ApplyPlan, EditOp, ModelReply, OffsetEdit, OpsRejected, plan_apply, resolve
from margin.core.vfs import PositionEncoding, VirtualFile
from margin.core.where import NOWHERE, Where
from margin.services.app import MarginApp
from margin.services.chat import ChatService
from margin.services.chat_tools import ToolsRefused
from margin.services.errors import RequestError
from margin.services.profile import resolve_profile, snapshot
from margin.services.structured import AnswerFailed, ask_json
from margin.services.turn import Ask, Prepared

log = logging.getLogger(__name__)

PROFILE = "chatOps"


class BaseSnapshots:
    """The texts models were shown, by file and fingerprint (two files may hold the same text),
    so a proposal can be rebased when the file has changed since. Bounded; the oldest are
    forgotten first."""

    def __init__(self, max_entries: int = 64) -> None:
        self._texts: OrderedDict[tuple[str, str], VirtualFile] = OrderedDict()
        self._max = max_entries

    def keep(self, file: VirtualFile) -> None:
        key = (file.uri, file.fingerprint)
        self._texts[key] = file
        self._texts.move_to_end(key)
        while len(self._texts) > self._max:
            self._texts.popitem(last=False)

    def get(self, uri: str, fingerprint: str) -> VirtualFile | None:
        return self._texts.get((uri, fingerprint))


@dataclass
class EditOpsOutcome:
    enabled: bool
    assistant_message: str
    thread_id: str | None = None
    ops: list[EditOp] = field(default_factory=list)
    base_fingerprints: dict[str, str] = field(default_factory=dict)
    edits: dict[str, list[OffsetEdit]] = field(default_factory=dict)
    """the ops as offset edits on each file's base text"""
    bases: dict[str, VirtualFile] = field(default_factory=dict)
    budget: BudgetReport | None = None


def _anchors(where: Where, seen: dict[str, VirtualFile], encoding: PositionEncoding) -> tuple[Anchor | None, Anchor | None]:
    """The selection and cursor of `where` as offsets into the text the model saw."""
    if not where.text_document or where.text_document not in seen:
        return None, None
    file = seen[where.text_document]
    selection = cursor = None
    if where.selection is not None:
        start = file.offset_at(where.selection.start, encoding)
        end = file.offset_at(where.selection.end, encoding)
        selection = Anchor(file.uri, min(start, end), max(start, end))
    if where.position is not None:
        offset = file.offset_at(where.position, encoding)
        cursor = Anchor(file.uri, offset, offset)
    elif selection is not None:
        cursor = Anchor(file.uri, selection.end, selection.end)
    return selection, cursor


def _anchored(request: ApplyRequest) -> Where:
    """The request's selection and cursor, in their document: margin/applyOps names none (SPEC),
    so it is the one file the selection and cursor ops target."""
    where = request.where
    if where.text_document is None:
        files = {op.target_file for op in request.ops if op.target in ("selection", "cursor")}
        if len(files) == 1:
            return replace(where, text_document=files.pop())
    return where


@dataclass
class ApplyRequest:
    ops: list[EditOp]
    base_fingerprints: dict[str, str]
    where: Where = NOWHERE
    """the selection and cursor `selection` and `cursor` ops were proposed for"""


@dataclass
class PreparedApply:
    """What applying would do: the edits on each file's current text, or why not."""

    plan: ApplyPlan | None
    files: dict[str, VirtualFile]
    """the current snapshot of each file the plan edits"""
    failure: str | None = None
    """why nothing can be applied, for a person"""

    @property
    def stale(self) -> list[str]:
        """Files changed where the edit goes (or closed) since the proposal."""
        return self.plan.stale if self.plan is not None else []


def _stale(plan: ApplyPlan) -> PreparedApply:
    return PreparedApply(plan, {}, f"Not applied: {', '.join(plan.stale)} changed where the edit goes since it "
                                   "was proposed (or was closed). Ask again for a fresh proposal.")


@dataclass
class EditOpsService:
    chat: ChatService
    snapshots: BaseSnapshots = field(default_factory=BaseSnapshots)

    @property
    def app(self) -> MarginApp:
        return self.chat.app

    async def propose(self, ask: Ask) -> EditOpsOutcome:
        settings = snapshot(self.app, PROFILE)
        if not settings.enabled:
            return EditOpsOutcome(False, "Edit-ops are turned off: set chatOps.enabled to true to use them.")
        try:  # offered the chat's tools, not to be called: the thread's prompts start the same
            async with self.chat.turn(ask, PROFILE, settings, tools=True) as prepared:
                try:
                    return await self._propose(ask, prepared)
                except ToolsRefused:  # remembered: prepared again without them, and sent once more
                    log.info("edit-ops tools refused thread=%s", prepared.thread.id)
                    self.app.backends.refused_tools(prepared.profile.settings)
                    prepared = await self.chat.prepare(ask, await resolve_profile(self.app, PROFILE, settings),
                                                       tools=True)
                    return await self._propose(ask, prepared)
        except RequestError as error:  # busy, missing thread or template, a tokenizer that failed
            return EditOpsOutcome(True, str(error))

    async def _propose(self, ask: Ask, prepared: Prepared) -> EditOpsOutcome:
        outcome = EditOpsOutcome(True, "", prepared.thread.id, budget=prepared.budget())
        if prepared.assembly.over_budget:
            outcome.assistant_message = (f"{prepared.assembly.over_budget} Close files, shorten the "
                                         "selection or the request, or use a model with a larger window.")
            return outcome
        seen = {ref.file.uri: ref.file for ref in prepared.seen_files()}
        names = {ref.file.uri: ref.file_id for ref in prepared.seen_files()}
        uri_of = {file_id: uri for uri, file_id in names.items()}
        try:
            answer = await ask_json(prepared.profile, prepared.assembly.messages, ModelReply,
                                    schema_name="margin_edit_ops", described_as="the edit schema",
                                    smaller="ask for a smaller change", retry="Try again, or rephrase the request.",
                                    tools=prepared.assembly.tools)
            ops = [EditOp(op.op, uri_of.get(op.target_file, op.target_file), op.target, op.match, op.content)
                   for op in answer.ops]
            selection, cursor = _anchors(ask.where, seen, self.app.files.encoding)
            edits = resolve(ops, {uri: file.text for uri, file in seen.items()},
                            selection=selection, cursor=cursor, names=names)
        except AnswerFailed as error:
            outcome.assistant_message = str(error)
            return outcome
        except OpsRejected as error:
            log.warning("edit-ops answer rejected thread=%s problems=%d", prepared.thread.id, len(error.problems))
            outcome.assistant_message = f"{error}. Try again, or rephrase the request."
            return outcome
        touched = sorted(edits)
        for uri in touched:
            self.snapshots.keep(seen[uri])
        await self.chat.store_turn(prepared, answer.assistant_message, {
            "ops": [op.model_dump(exclude_none=True) for op in answer.ops]})
        log.info("edit-ops proposed thread=%s ops=%d files=%d", prepared.thread.id, len(ops), len(touched))
        outcome.assistant_message = answer.assistant_message
        outcome.ops = ops
        outcome.edits = edits
        outcome.bases = {uri: seen[uri] for uri in touched}
        outcome.base_fingerprints = {uri: seen[uri].fingerprint for uri in seen}
        return outcome

    def prepare_apply(self, request: ApplyRequest) -> PreparedApply:
        """Re-validate the ops against the texts the model saw and compare those with the files now:
        equal → apply as proposed; changed clear of the ops → rebase exactly; otherwise stale."""
        app = self.app
        targets = {op.target_file for op in request.ops}
        missing = sorted(uri for uri in targets if uri not in request.base_fingerprints)
        if missing:
            return PreparedApply(None, {}, f"ops target files with no base fingerprint: {', '.join(missing)}")
        bases: dict[str, VirtualFile] = {}
        stale: list[str] = []
        for uri in targets:
            fingerprint = request.base_fingerprints[uri]
            current = app.files.get(uri)
            base = self.snapshots.get(uri, fingerprint)
            if base is None and current is not None and current.fingerprint == fingerprint:
                base = current  # the open file is exactly the text the ops were made against
            if base is None:
                stale.append(uri)  # not open, or changed with no record of what the model saw
            else:
                bases[uri] = base
        if stale:
            return _stale(ApplyPlan({}, {}, sorted(stale), False))
        selection, cursor = _anchors(_anchored(request), bases, app.files.encoding)
        try:
            edits = resolve(request.ops, {uri: base.text for uri, base in bases.items()},
                            selection=selection, cursor=cursor)
        except OpsRejected as error:
            return PreparedApply(None, {}, str(error))
        currents = {uri: file.text for uri in targets if (file := app.files.get(uri)) is not None}
        plan = plan_apply(edits, {uri: base.text for uri, base in bases.items()}, currents)
        if plan.stale:
            return _stale(plan)
        files = {uri: file for uri in plan.edits if (file := app.files.get(uri)) is not None}  # all open: not stale
        return PreparedApply(plan, files)
