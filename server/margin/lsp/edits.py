"""Margin's edits as LSP workspace edits: versioned TextDocumentEdits whose ranges are in the
negotiated position encoding, optionally annotated as needing confirmation."""

from __future__ import annotations

from typing import Mapping, Sequence

from lsprotocol import types

from margin.core.editops import OffsetEdit
from margin.core.vfs import PositionEncoding, VirtualFile

ANNOTATION = "margin"


def _range(file: VirtualFile, edit: OffsetEdit, encoding: PositionEncoding) -> types.Range:
    start, end = file.position_at(edit.start, encoding), file.position_at(edit.end, encoding)
    return types.Range(types.Position(start.line, start.character), types.Position(end.line, end.character))


def workspace_edit(
    files: Mapping[str, VirtualFile],
    edits: Mapping[str, Sequence[OffsetEdit]],
    encoding: PositionEncoding,
    *,
    confirm: bool = False,
    label: str = "Margin edit",
) -> types.WorkspaceEdit:
    """`edits` (offsets into each file's text at `files[uri].version`) as a WorkspaceEdit that
    only applies to that version."""
    changes = []
    for uri in sorted(edits):
        file = files[uri]
        text_edits: list[types.TextEdit | types.AnnotatedTextEdit] = [
            types.AnnotatedTextEdit(range=_range(file, e, encoding), new_text=e.text, annotation_id=ANNOTATION)
            if confirm else types.TextEdit(range=_range(file, e, encoding), new_text=e.text)
            for e in edits[uri]
        ]
        changes.append(types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=file.version),
            edits=text_edits,
        ))
    annotations = ({ANNOTATION: types.ChangeAnnotation(label=label, needs_confirmation=True)}
                   if confirm else None)
    return types.WorkspaceEdit(document_changes=changes, change_annotations=annotations)
