"""LSP types ⇄ Margin's core values, in one place: positions, ranges, content changes,
diagnostics, and Margin's edits as versioned workspace edits whose ranges are in the negotiated
position encoding (optionally annotated as needing confirmation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lsprotocol import types

from margin.core.editops import OffsetEdit
from margin.core.selection_edit import Diagnostic
from margin.core.vfs import Position, PositionEncoding, Range, TextChange, VirtualFile

ANNOTATION = "margin"


def position(p: types.Position) -> Position:
    return Position(p.line, p.character)


def range_(r: types.Range) -> Range:
    return Range(position(r.start), position(r.end))


def lsp_range(r: Range) -> types.Range:
    return types.Range(types.Position(r.start.line, r.start.character), types.Position(r.end.line, r.end.character))


def change(event: types.TextDocumentContentChangeEvent) -> TextChange:
    if isinstance(event, types.TextDocumentContentChangePartial):
        return TextChange(event.text, range_(event.range))
    return TextChange(event.text)


def diagnostic(d: types.Diagnostic) -> Diagnostic:
    return Diagnostic(d.range.start.line, d.message, d.source, None if d.code is None else str(d.code),
                      d.range.end.line)


def _offsets_range(file: VirtualFile, edit: OffsetEdit, encoding: PositionEncoding) -> types.Range:
    return lsp_range(Range(file.position_at(edit.start, encoding), file.position_at(edit.end, encoding)))


def workspace_edit(
    files: Mapping[str, VirtualFile],
    edits: Mapping[str, Sequence[OffsetEdit]],
    encoding: PositionEncoding,
    *,
    confirm: bool = False,
    label: str = "Margin edit",
    description: str | None = None,
) -> types.WorkspaceEdit:
    """`edits` (offsets into each file's text at `files[uri].version`) as a WorkspaceEdit that
    only applies to that version."""
    changes = []
    for uri in sorted(edits):
        file = files[uri]
        text_edits: list[types.TextEdit | types.AnnotatedTextEdit] = [
            types.AnnotatedTextEdit(range=_offsets_range(file, e, encoding), new_text=e.text, annotation_id=ANNOTATION)
            if confirm else types.TextEdit(range=_offsets_range(file, e, encoding), new_text=e.text)
            for e in edits[uri]
        ]
        changes.append(types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=file.version),
            edits=text_edits,
        ))
    annotations = ({ANNOTATION: types.ChangeAnnotation(label=label, needs_confirmation=True, description=description)}
                   if confirm else None)
    return types.WorkspaceEdit(document_changes=changes, change_annotations=annotations)
