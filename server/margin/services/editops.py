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
from dataclasses import dataclass, field
from typing import Any

from margin.core.editops import (
    Anchor,
    ApplyPlan,
    EditOp,
    OffsetEdit,
    OpsRejected,
    ReplyRejected,
    parse_reply,
    plan_apply,
    reply_json_schema,
    resolve,
)
from margin.core.llm import ChatRequest, ContextTooLarge, ProviderError
from margin.core.vfs import VirtualFile
from margin.services.chat import ChatError, ChatParams, ChatService, Prepared

log = logging.getLogger(__name__)

PROFILE = "chatOps"


class BaseSnapshots:
    """The texts models were shown, by fingerprint, so a proposal can be rebased when the
    file has changed since. Bounded; the oldest are forgotten first."""

    def __init__(self, max_entries: int = 64) -> None:
        self._texts: OrderedDict[str, VirtualFile] = OrderedDict()
        self._max = max_entries

    def keep(self, file: VirtualFile) -> None:
        self._texts[file.fingerprint] = file
        self._texts.move_to_end(file.fingerprint)
        while len(self._texts) > self._max:
            self._texts.popitem(last=False)

    def get(self, fingerprint: str) -> VirtualFile | None:
        return self._texts.get(fingerprint)


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
    budget: dict[str, Any] = field(default_factory=dict)


def _anchors(params: ChatParams, seen: dict[str, VirtualFile], encoding: Any) -> tuple[Anchor | None, Anchor | None]:
    if not params.text_document or params.text_document not in seen:
        return None, None
    file = seen[params.text_document]
    selection = cursor = None
    if params.selection is not None:
        start = file.offset_at(params.selection.start, encoding)
        end = file.offset_at(params.selection.end, encoding)
        selection = Anchor(file.uri, min(start, end), max(start, end))
    if params.position is not None:
        offset = file.offset_at(params.position, encoding)
        cursor = Anchor(file.uri, offset, offset)
    elif selection is not None:
        cursor = Anchor(file.uri, selection.end, selection.end)
    return selection, cursor


@dataclass
class EditOpsService:
    chat: ChatService
    snapshots: BaseSnapshots = field(default_factory=BaseSnapshots)

    async def propose(self, params: ChatParams) -> EditOpsOutcome:
        app = self.chat.app
        profile = app.settings.current.profile(PROFILE)
        if not profile.enabled:
            return EditOpsOutcome(False, "Edit-ops are turned off: set chatOps.enabled to true to use them.")
        try:
            async with self.chat.turn(params, PROFILE) as prepared:
                return await self._propose(params, prepared)
        except ChatError as error:  # busy, missing thread or template, a tokenizer that failed
            return EditOpsOutcome(True, str(error))

    async def _propose(self, params: ChatParams, prepared: Prepared) -> EditOpsOutcome:
        app = self.chat.app
        profile = app.settings.current.profile(PROFILE)
        budget = prepared.budget()
        outcome = EditOpsOutcome(True, "", prepared.thread.id, budget=budget)
        if prepared.assembly.over_budget:
            outcome.assistant_message = (f"{prepared.assembly.over_budget} Close files, shorten the "
                                         "selection or the request, or use a model with a larger window.")
            return outcome
        request = ChatRequest(
            prepared.assembly.messages, profile.max_output_tokens, profile.temperature, profile.model,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "margin_edit_ops", "schema": reply_json_schema()}},
        )
        try:
            reply = await app.backends.provider(PROFILE, profile).complete(request)
        except ContextTooLarge as error:
            outcome.assistant_message = str(error)
            return outcome
        except ProviderError as error:
            log.warning("edit-ops failed thread=%s error=%s", prepared.thread.id, error.kind)
            outcome.assistant_message = f"{error} Nothing was changed."
            return outcome
        if reply.finish_reason == "length":
            outcome.assistant_message = (
                f"The model's answer was cut off at maxOutputTokens ({profile.max_output_tokens}), so it "
                "cannot be used. Raise chatOps.maxOutputTokens, or ask for a smaller change.")
            return outcome
        seen = {ref.file.uri: ref.file for ref in prepared.seen_files()}
        names = {ref.file.uri: ref.file_id for ref in prepared.seen_files()}
        uri_of = {file_id: uri for uri, file_id in names.items()}
        try:
            answer = parse_reply(reply.content)
            ops = [EditOp(op.op, uri_of.get(op.target_file, op.target_file), op.target, op.match, op.content)
                   for op in answer.ops]
            selection, cursor = _anchors(params, seen, app.files.encoding)
            edits = resolve(ops, {uri: file.text for uri, file in seen.items()},
                            selection=selection, cursor=cursor, names=names)
        except ReplyRejected as error:
            log.warning("edit-ops answer unusable thread=%s", prepared.thread.id)
            outcome.assistant_message = f"Nothing was changed: {error}. Try again, or rephrase the request."
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


@dataclass
class ApplyRequest:
    ops: list[EditOp]
    base_fingerprints: dict[str, str]
    selection: Any = None
    position: Any = None
    text_document: str | None = None


@dataclass
class PreparedApply:
    """What applying would do: the edits on each file's current text, or why not."""

    plan: ApplyPlan | None
    files: dict[str, VirtualFile]
    failure: str | None = None


def prepare_apply(service: EditOpsService, request: ApplyRequest) -> PreparedApply:
    """Re-validate the ops against the texts the model saw and compare those with the files now:
    equal → apply as proposed; changed clear of the ops → rebase exactly; otherwise stale."""
    app = service.chat.app
    targets = {op.target_file for op in request.ops}
    missing = sorted(uri for uri in targets if uri not in request.base_fingerprints)
    if missing:
        return PreparedApply(None, {}, f"ops target files with no base fingerprint: {', '.join(missing)}")
    bases: dict[str, VirtualFile] = {}
    stale: list[str] = []
    for uri in targets:
        fingerprint = request.base_fingerprints[uri]
        current = app.files.get(uri)
        base = service.snapshots.get(fingerprint)
        if base is None and current is not None and current.fingerprint == fingerprint:
            base = current
        if base is None or base.uri != uri:
            stale.append(uri)  # not open, or changed with no record of what the model saw
        else:
            bases[uri] = base
    if stale:
        return PreparedApply(ApplyPlan({}, {}, sorted(stale), False), {})
    params = ChatParams("", text_document=request.text_document, selection=request.selection,
                        position=request.position)
    selection, cursor = _anchors(params, bases, app.files.encoding)
    try:
        edits = resolve(request.ops, {uri: base.text for uri, base in bases.items()},
                        selection=selection, cursor=cursor)
    except OpsRejected as error:
        return PreparedApply(None, {}, str(error))
    currents = {uri: file.text for uri in targets if (file := app.files.get(uri)) is not None}
    plan = plan_apply(edits, {uri: base.text for uri, base in bases.items()}, currents)
    files = {uri: app.files.get(uri) for uri in plan.edits}  # type: ignore[misc]
    return PreparedApply(plan, files)  # type: ignore[arg-type]
