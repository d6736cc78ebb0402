"""Next-edit suggestions: `margin/nextEdit`, and the same answer as `textDocument/copilotInlineEdit`
(the Copilot language server's shape, which Neovim's next-edit interfaces read); the edit history
kept from the documents' changes while the `nextEdit` profile is on; and the next edit near the
cursor as an inline completion item (`near_edit_item`), which editors show with no code of their
own."""

from __future__ import annotations

import logging
from typing import Any

from margin import deferred, logs
from margin.core.vfs import Position, Range
from margin.lsp.methods import COPILOT_INLINE_EDIT, NEXT_EDIT
from margin.lsp.server import MarginLanguageServer, answering_failures, parse_params
from margin.services.errors import RequestError

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
with deferred.imports():
    from margin.core.next_edit import decide
    from margin.lsp import wire, wire_completion, wire_next_edit

log = logging.getLogger(__name__)


def _range(ls: MarginLanguageServer, uri: str, edit: decide.Suggested) -> wire.RangeModel:
    file = ls.app.files.get(uri)
    assert file is not None
    encoding = ls.app.files.encoding
    return wire.RangeModel.of(Range(file.position_at(edit.start, encoding), file.position_at(edit.end, encoding)))


async def _suggest(ls: MarginLanguageServer, params: Any, method: str) -> tuple[Any, Any, str | None]:
    """(the request, its edits, why none) — none for a version the document has moved on from."""
    request = parse_params(wire_next_edit.NextEditParams, params, method)
    document = request.text_document
    file = ls.app.files.get(document.uri)
    if file is not None and file.version != document.version:
        return request, (), f"asked for version {document.version}, the document is at version {file.version}"
    with answering_failures():
        outcome = await ls.services.next_edit.suggest(document.uri, request.position.line)
    if not outcome.enabled:
        return request, (), outcome.silence
    current = ls.app.files.get(document.uri)
    if current is None or current.version != document.version or current.fingerprint != outcome.fingerprint:
        return request, (), "the document changed meanwhile"
    return request, outcome.edits, outcome.silence


async def next_edit(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request, edits, reason = await _suggest(ls, params, NEXT_EDIT.name)
    uri = request.text_document.uri
    ranges = [_range(ls, uri, edit) for edit in edits]
    result = wire_next_edit.NextEditResult(
        edits=[wire_next_edit.NextEditModel(range=r, new_text=e.text) for r, e in zip(ranges, edits, strict=True)],
        version=request.text_document.version)
    if ranges:
        result.jump_to = wire_next_edit.StandardPosition(line=ranges[0].start.line, character=ranges[0].start.character)
    if reason and not edits:
        result.reason = reason
    return result.dump()


async def copilot_inline_edit(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    """One edit (Copilot's `edits` are alternatives): Margin's edits joined into the one that
    rewrites the text from the first's start to the last's end."""
    request, edits, _reason = await _suggest(ls, params, COPILOT_INLINE_EDIT.name)
    document = request.text_document
    file = ls.app.files.get(document.uri)
    if not edits or file is None:
        return wire_next_edit.CopilotInlineEditResult(edits=[]).dump()
    start, end = edits[0].start, edits[-1].end
    text, at = [], start
    for edit in edits:
        text += [file.text[at : edit.start], edit.text]
        at = edit.end
    joined = decide.Suggested(start, end, "".join(text))
    item = wire_next_edit.CopilotInlineEditModel(
        text=joined.text, range=_range(ls, document.uri, joined),
        text_document=wire_next_edit.CopilotDocumentModel(uri=document.uri, version=document.version))
    return wire_next_edit.CopilotInlineEditResult(edits=[item]).dump()


async def near_edit_item(ls: MarginLanguageServer, uri: str, version: int | None, position: Position,
                         wait: bool) -> wire_completion.InlineCompletionItemModel | None:
    """The next edit as an inline completion item, when it starts on the cursor's line at or
    after the cursor and ends on that line (decide.near): the one already made for the document as
    it is, or, with `wait`, the one asked for now (shared with the request in flight for the same
    place). None while next-edit suggestions are off."""
    if not ls.app.settings.current.profile("nextEdit").enabled:
        return None
    service = ls.services.next_edit
    try:
        outcome = await service.suggest(uri, position.line) if wait else service.known(uri, position.line)
    except RequestError:
        return None
    except Exception:  # a bug: logged in full; the completion still answers
        log.exception("next edit crashed uri=%s", logs.name(uri))
        return None
    file = ls.app.files.get(uri)
    if outcome is None or not outcome.edits or file is None or file.fingerprint != outcome.fingerprint \
            or (version is not None and version != file.version):
        return None
    encoding = ls.app.files.encoding
    found = decide.near(file.text, file.offset_at(position, encoding), outcome.edits)
    if found is None:
        return None
    return wire_completion.InlineCompletionItemModel(
        insert_text=found.text,
        range=wire.RangeModel.of(Range(file.position_at(found.start, encoding), file.position_at(found.end, encoding))))


def register(server: MarginLanguageServer) -> None:
    server.feature(NEXT_EDIT.name)(next_edit)
    server.feature(COPILOT_INLINE_EDIT.name)(copilot_inline_edit)
