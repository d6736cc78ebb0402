"""Edit-ops through the real margin-lsp process: the proposal with its preview, and applying it
fresh, rebased, stale, refused, unanswered, and as a command."""

from __future__ import annotations

import json
from pathlib import Path

from lsprotocol import types

from margin.core.vfs import Position, PositionEncoding, VirtualFile
from tests.conftest import until
from tests.e2e.lsp_client import change_doc, margin_client, open_doc, request
from tests.fakes.fake_openai import reply

WS = "file:///ws"
A = f"{WS}/a.py"
TEXT = "def f():\n    return 1  # 😀\n\ndef g():\n    return 2\n"
CAPS = types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(apply_edit=True, configuration=True))


def start(fake, tmp_path, **extra):
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", **extra}
    return margin_client(env=env, root=Path("/ws"), capabilities=CAPS)


def apply_text_edits(text: str, edits) -> str:
    """Apply one TextDocumentEdit's edits (UTF-16 ranges on the same original text)."""
    file = VirtualFile("x", "python", 0, text)
    spans = []
    for edit in edits:
        r = edit["range"] if isinstance(edit, dict) else edit.range
        new = edit["newText"] if isinstance(edit, dict) else edit.new_text
        start = r["start"] if isinstance(r, dict) else {"line": r.start.line, "character": r.start.character}
        end = r["end"] if isinstance(r, dict) else {"line": r.end.line, "character": r.end.character}
        spans.append((file.offset_at(Position(start["line"], start["character"]), PositionEncoding.UTF16),
                      file.offset_at(Position(end["line"], end["character"]), PositionEncoding.UTF16), new))
    for a, b, new in sorted(spans, reverse=True):
        text = text[:a] + new + text[b:]
    return text


def proposal(fake):
    fake.script(reply(json.dumps({"assistant_message": "g now returns 3.", "ops": [
        {"op": "replace", "target_file": "a.py", "target": "match", "match": "    return 2\n", "content": "    return 3\n"}]})))


async def propose(client):
    return await request(client, "margin/editOps", {"message": "make g return 3", "textDocument": {"uri": A}})


async def test_proposal_carries_ops_fingerprints_and_a_versioned_preview(fake, tmp_path):
    proposal(fake)
    async with start(fake, tmp_path) as client:
        open_doc(client, A, TEXT, version=4)
        result = await propose(client)
    assert result["enabled"] and result["assistantMessage"] == "g now returns 3."
    assert result["ops"] == [{"op": "replace", "targetFile": A, "target": "match",
                              "match": "    return 2\n", "content": "    return 3\n"}]
    assert result["baseFingerprints"] == {A: VirtualFile(A, "python", 4, TEXT).fingerprint}
    (change,) = result["edit"]["documentChanges"]
    assert change["textDocument"] == {"uri": A, "version": 4}
    assert apply_text_edits(TEXT, change["edits"]).endswith("def g():\n    return 3\n")


async def test_apply_fresh_sends_a_versioned_edit_and_reports_applied(fake, tmp_path):
    proposal(fake)
    async with start(fake, tmp_path) as client:
        open_doc(client, A, TEXT, version=4)
        result = await propose(client)
        applied = await request(client, "margin/applyOps", {"ops": result["ops"], "baseFingerprints": result["baseFingerprints"]})
        assert applied == {"applied": True, "rebased": False, "staleFiles": []}
        (sent,) = client.applied_edits
        (change,) = sent.edit.document_changes
        assert change.text_document.version == 4
        assert apply_text_edits(TEXT, change.edits).endswith("def g():\n    return 3\n")


async def test_apply_after_a_change_elsewhere_rebases_exactly(fake, tmp_path):
    proposal(fake)
    async with start(fake, tmp_path) as client:
        open_doc(client, A, TEXT, version=1)
        result = await propose(client)
        change_doc(client, A, 2, ((0, 0, 0, 0), "import os\n\n"))  # the user edits above
        applied = await request(client, "margin/applyOps", {"ops": result["ops"], "baseFingerprints": result["baseFingerprints"]})
        assert applied == {"applied": True, "rebased": True, "staleFiles": []}
        (change,) = client.applied_edits[0].edit.document_changes
        assert change.text_document.version == 2
        current = "import os\n\n" + TEXT
        assert apply_text_edits(current, change.edits) == "import os\n\n" + TEXT.replace("return 2", "return 3")


async def test_apply_after_a_change_in_the_region_refuses_and_names_the_file(fake, tmp_path):
    proposal(fake)
    async with start(fake, tmp_path) as client:
        open_doc(client, A, TEXT, version=1)
        result = await propose(client)
        change_doc(client, A, 2, ((4, 11, 4, 12), "9"))  # "return 2" -> "return 9"
        applied = await request(client, "margin/applyOps", {"ops": result["ops"], "baseFingerprints": result["baseFingerprints"]})
        assert applied["applied"] is False and applied["staleFiles"] == [A] and A in applied["failureReason"]
        assert client.applied_edits == []  # nothing was sent


async def test_refused_and_unanswered_apply_edits_are_reported(fake, tmp_path):
    """An answer that comes after Margin gave up waiting is dropped quietly (pygls raised
    InvalidStateError setting the result of the cancelled wait: found by the parameter fuzz on a
    loaded machine), and the next apply works."""
    proposal(fake)
    log_file = tmp_path / "margin.log"
    async with start(fake, tmp_path, MARGIN_APPLY_EDIT_TIMEOUT_S="1", MARGIN_LOG_FILE=str(log_file)) as client:
        open_doc(client, A, TEXT)
        result = await propose(client)
        params = {"ops": result["ops"], "baseFingerprints": result["baseFingerprints"]}
        client.apply_edit_mode = "reject"
        refused = await request(client, "margin/applyOps", params)
        assert refused["applied"] is False and "user said no" in refused["failureReason"]
        client.apply_edit_mode = "hang"
        silent = await request(client, "margin/applyOps", params)
        assert silent["applied"] is False and "did not answer workspace/applyEdit within 1 s" in silent["failureReason"]
        client.release_hang.set()  # the editor answers now, too late
        await until(lambda: "answer after the request was given up" in log_file.read_text())
        client.apply_edit_mode = "apply"
        applied = await request(client, "margin/applyOps", params)
        assert applied["applied"] is True
    assert "Traceback" not in log_file.read_text()


async def test_apply_ops_command_and_confirmation_annotations(fake, tmp_path):
    proposal(fake)
    async with start(fake, tmp_path, MARGIN_CONFIRM_EDITS="true") as client:
        open_doc(client, A, TEXT)
        result = await propose(client)
        assert "margin.applyOps" in client.init_result.capabilities.execute_command_provider.commands
        applied = await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="margin.applyOps", arguments=[{"ops": result["ops"], "baseFingerprints": result["baseFingerprints"]}]))
        assert (applied["applied"] if isinstance(applied, dict) else applied.applied) is True
        sent = client.applied_edits[0].edit
        assert sent.change_annotations["margin"].needs_confirmation is True
        assert sent.document_changes[0].edits[0].annotation_id == "margin"


async def test_ops_on_a_file_without_a_base_are_refused_naming_it(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        open_doc(client, A, TEXT)
        applied = await request(client, "margin/applyOps", {"ops": [
            {"op": "delete", "targetFile": f"{WS}/other.py", "target": "document"}], "baseFingerprints": {}})
    assert applied["applied"] is False and "other.py" in applied["failureReason"]


async def test_ops_on_the_selection_apply_with_the_params_spec_gives_apply_ops(fake, tmp_path):
    """margin/applyOps takes `{ops, baseFingerprints, selection?, position?}` (no document): a
    selection or cursor op is anchored in its own target file. The server looked for the
    selection in a `textDocument` the client never sends, and refused every such op (found by
    the model-output fuzz at 1,000 answers through the server)."""
    fake.script(reply(json.dumps({"assistant_message": "Wrapped.", "ops": [
        {"op": "replace", "target_file": "a.py", "target": "selection", "content": "    return 3\n"},
        {"op": "insert", "target_file": "a.py", "target": "cursor", "content": "# checked\n"}]})))
    selection = {"start": {"line": 4, "character": 0}, "end": {"line": 5, "character": 0}}
    cursor = {"line": 0, "character": 0}
    async with start(fake, tmp_path) as client:
        open_doc(client, A, TEXT, version=1)
        result = await request(client, "margin/editOps", {"message": "make g return 3", "textDocument": {"uri": A},
                                                          "selection": selection, "position": cursor})
        assert len(result["ops"]) == 2, result
        applied = await request(client, "margin/applyOps", {"ops": result["ops"], "selection": selection,
                                                            "position": cursor,
                                                            "baseFingerprints": result["baseFingerprints"]})
        assert applied == {"applied": True, "rebased": False, "staleFiles": []}, applied
        (change,) = client.applied_edits[0].edit.document_changes
        assert apply_text_edits(TEXT, change.edits) == "# checked\n" + TEXT.replace("    return 2\n", "    return 3\n")
