"""Margin's methods are declared once (margin.lsp.methods): the server registers and advertises
exactly those, each parses its params with the declared model, and every response recorded in
golden/wire.json is what the declared result model writes."""

from __future__ import annotations

import json

import pytest

from margin.lsp import methods
from margin.lsp.server import create_server
from margin.wiring import build_app
from tests.conftest import REPO

GOLDEN = json.loads((REPO / "tests" / "e2e" / "golden" / "wire.json").read_text(encoding="utf-8"))
COMMAND_LABELS = {"apply-ops command": methods.APPLY_OPS_COMMAND, "edit selection command": methods.EDIT_SELECTION_COMMAND,
                  "edit selection command, the editor answers with an error": methods.EDIT_SELECTION_COMMAND}


def test_names_are_unique_and_each_model_exists():
    names = [method.name for method in methods.ALL]
    assert len(names) == len(set(names))
    for method in methods.ALL:
        assert method.params_model() is not None and method.result_model() is not None, method.name
        assert method.doc and method.use, method.name


async def test_the_server_registers_every_declared_method_and_command_and_no_other(tmp_path):
    server = create_server(build_app({"MARGIN_DATABASE": str(tmp_path / "t.db")}))
    try:
        features = server.protocol.fm.features
        own = sorted(name for name in features if name.startswith("margin/"))
        assert own == sorted(methods.request_names() + [method.name for method in methods.NOTIFICATIONS])
        assert all(method.name in features for method in methods.STANDARD)
        assert list(server.protocol.fm.commands) == [command.name for command in methods.COMMANDS]
    finally:
        await server.app.aclose()


def _with_times(value):
    """The recording with its timestamps (recorded as `<time>`) as numbers again."""
    if value == "<time>":
        return 1700000000.5
    if isinstance(value, dict):
        return {key: _with_times(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_times(item) for item in value]
    return value


def _declared(entry: dict) -> methods.Method | None:
    by_name = {method.name: method for method in methods.REQUESTS + methods.STANDARD}
    return COMMAND_LABELS.get(entry["label"]) or by_name.get(entry["method"])


@pytest.mark.parametrize("entry", [e for e in GOLDEN if isinstance(e["response"], dict) and "result" in e["response"]
                                   and _declared(e) is not None], ids=lambda e: e["label"])
def test_every_recorded_result_is_what_its_declared_model_writes(entry):
    model = _declared(entry).result_model()
    result = _with_times(entry["response"]["result"])
    assert model.model_validate(result).dump() == result


@pytest.mark.parametrize(("label", "method"), [("$/progress", methods.CHAT), ("$/progress (margin/agent)", methods.AGENT)])
def test_every_recorded_partial_result_is_what_its_declared_model_writes(label, method):
    (progress,) = [e for e in GOLDEN if e["method"] == label]
    model = method.partial_model()
    values = [message["value"] for message in progress["response"]]
    assert values and all(model.model_validate(value).dump() == value for value in values)


def test_the_recording_covers_every_declared_request_and_command():
    recorded = {_declared(e).name for e in GOLDEN if _declared(e) is not None and "result" in e["response"]}
    assert recorded == {method.name for method in methods.ALL if method.kind != "notification"}
