"""What margin/lsp/pygls_private.py relies on in pygls and lsprotocol, pinned: their versions,
the signatures of the private methods it overrides or calls, the private attributes it reads
(present on a real server after construction), the behaviours it counts on, and that no other
module of Margin touches a private part of pygls. After an upgrade, a failure here names what
moved and the numbered use in that module's docstring to re-read."""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import json
import threading
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any

import cattrs
import pytest
from lsprotocol import converters, types
from pygls.feature_manager import FeatureManager
from pygls.lsp.server import LanguageServer
from pygls.progress import Progress
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol
from pygls.server import JsonRPCServer

from margin.lsp import pygls_private
from margin.lsp.protocol import MarginProtocol
from margin.lsp.pygls_private import HookedProtocol

MODULE = Path(pygls_private.__file__)
SERVER = MODULE.parents[1]
PYGLS = importlib.metadata.version("pygls")

SIGNATURES = [
    # (class, method, its parameters, the use in pygls_private's docstring)
    (JsonRPCProtocol, "_handle_request", "(self, msg_id, method_name, params)", 1),
    (JsonRPCProtocol, "_send_handler_result", "(self, future, *, msg_id)", 2),
    (JsonRPCProtocol, "_handle_response", "(self, msg_id, result=None, error=None)", 3),
    (JsonRPCProtocol, "_handle_notification", "(self, method_name, params)", 4),
    (JsonRPCProtocol, "_send_response", "(self, msg_id, result=None, error=None)", 5),
    (LanguageServerProtocol, "lsp_initialize", "(self, params)", 11),
    (LanguageServerProtocol, "lsp_text_document__did_open", "(self, params)", 12),
    (LanguageServerProtocol, "lsp_text_document__did_change", "(self, params)", 12),
    (LanguageServerProtocol, "lsp_text_document__did_close", "(self, params)", 12),
    (JsonRPCServer, "_report_server_error", "(self, error, source)", 15),
]

BUILT_IN = {"lsp_initialize": types.INITIALIZE, "lsp_text_document__did_open": types.TEXT_DOCUMENT_DID_OPEN,
            "lsp_text_document__did_change": types.TEXT_DOCUMENT_DID_CHANGE,
            "lsp_text_document__did_close": types.TEXT_DOCUMENT_DID_CLOSE}

PROTOCOL_ATTRIBUTES = {"_converter": 6, "_shutdown": 7, "_request_futures": 8, "_server": 9, "fm": 10}
SERVER_ATTRIBUTES = {"_stop_event": 13, "_server": 14}


def parameters(function: Any) -> str:
    """A signature without its annotations: what a call or an override depends on."""
    signature = inspect.signature(function)
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=inspect.Signature.empty))


def moved(what: str, use: int) -> str:
    return (f"pygls {PYGLS}: {what}. margin/lsp/pygls_private.py relies on it (use {use} in its "
            "docstring): re-read pygls' source there, adapt the module, then this pin.")


class Writer:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def close(self) -> None:
        pass


def hooked_server(protocol_cls: type[HookedProtocol] = HookedProtocol) -> LanguageServer:
    server = LanguageServer("pinned", "0", protocol_cls=protocol_cls)
    server.protocol.set_writer(Writer())
    return server


def test_the_pinned_versions_are_installed():
    for package, pinned in (("pygls", pygls_private.PYGLS_VERSION), ("lsprotocol", pygls_private.LSPROTOCOL_VERSION)):
        installed = importlib.metadata.version(package)
        assert installed == pinned, (
            f"{package} is {installed}; margin/lsp/pygls_private.py was checked against {pinned}. Re-read "
            f"{package}'s source for each use its docstring lists, then update the versions there")


@pytest.mark.parametrize(("owner", "name", "expected", "use"), SIGNATURES, ids=[row[1] for row in SIGNATURES])
def test_the_methods_overridden_or_called_keep_their_signature(owner, name, expected, use):
    assert name in vars(owner), moved(f"{owner.__qualname__}.{name} is no longer defined there", use)
    actual = parameters(getattr(owner, name))
    assert actual == expected, moved(f"{owner.__qualname__}.{name}{actual}, was {expected}", use)
    override = vars(HookedProtocol).get(name)
    if override is not None:
        assert parameters(override) == actual, f"HookedProtocol.{name} must take what pygls passes: {actual}"


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_the_built_in_handlers_replaced_are_found_by_name(name):
    """pygls registers a method of its protocol carrying `method_name` as a built-in handler
    and runs it as a generator; a subclass's method of the same name replaces it."""
    built_in = getattr(LanguageServerProtocol, name)
    assert getattr(built_in, "method_name", None) == BUILT_IN[name], moved(f"{name} no longer handles {BUILT_IN[name]}", 11)
    assert inspect.isgeneratorfunction(built_in), moved(f"{name} is no longer a generator handler", 11)
    registered = hooked_server().protocol.fm.builtin_features[BUILT_IN[name]]
    assert registered.__func__ is vars(HookedProtocol)[name], moved(f"{BUILT_IN[name]} is no longer handled by {name}", 11)


def test_the_private_attributes_read_exist_after_construction():
    server = LanguageServer("pinned", "0")
    protocol = server.protocol
    for name, use in PROTOCOL_ATTRIBUTES.items():
        assert hasattr(protocol, name), moved(f"LanguageServerProtocol has no `{name}` after construction", use)
    for name, use in SERVER_ATTRIBUTES.items():
        assert name in vars(server), moved(f"LanguageServer has no `{name}` after construction", use)
    assert isinstance(protocol._converter, cattrs.Converter), moved("`_converter` is not a cattrs Converter", 6)
    assert protocol._shutdown is False, moved("`_shutdown` does not start False", 7)
    assert protocol._request_futures == {}, moved("`_request_futures` is not a dict of running requests", 8)
    assert protocol._server is server, moved("the protocol's `_server` is not its server", 9)
    assert isinstance(protocol.fm, FeatureManager), moved("`fm` is not a FeatureManager", 10)
    assert isinstance(protocol.fm.features, dict) and isinstance(protocol.fm.builtin_features, dict), (
        moved("`fm.features` or `fm.builtin_features` is not a dict by method", 10))


def test_shutdown_stops_the_read_loop_and_closes_the_listener():
    class Listener:
        closed = False

        def close(self) -> None:
            self.closed = True

    server = LanguageServer("pinned", "0")
    stop = pygls_private.new_stop_event(server)
    listener = Listener()
    pygls_private.close_on_shutdown(server, listener)  # type: ignore[arg-type]
    assert isinstance(stop, threading.Event) and not stop.is_set()
    server.shutdown()
    assert stop.is_set(), moved("shutdown() no longer sets `_stop_event`", 13)
    assert listener.closed, moved("shutdown() no longer closes `_server`", 14)


def test_the_error_reporter_reports_and_never_raises():
    server = LanguageServer("pinned", "0")
    reported = []

    def report(error: Exception, source: type) -> None:
        reported.append((error, source))
        raise RuntimeError("the reporter failed")

    server.report_server_error = report  # type: ignore[method-assign]
    error = ValueError("a bug")
    pygls_private.error_reporter(server)(error, Exception)
    assert reported == [(error, Exception)], moved("`_report_server_error` no longer calls report_server_error", 15)


def test_a_finished_request_reaches_request_done_with_its_method():
    done: list[tuple[Any, str, Any]] = []

    class Recording(HookedProtocol):
        def request_done(self, msg_id: Any, method: str, future: Future[Any]) -> None:
            done.append((msg_id, method, future.result()))
            super().request_done(msg_id, method, future)

    server = hooked_server(Recording)
    server.feature("pinned/answer")(lambda ls, params: 42)
    server.protocol._handle_request(7, "pinned/answer", None)
    server.protocol._handle_request(8, "pinned/noSuchMethod", None)
    assert done == [(7, "pinned/answer", 42)], moved("a request's result no longer goes to `_send_handler_result`", 2)
    answers = [json.loads(data.split(b"\r\n\r\n", 1)[1]) for data in server.protocol.writer.sent]  # type: ignore[union-attr]
    assert [(a["id"], a.get("result"), a.get("error", {}).get("code")) for a in answers] == [(7, 42, None), (8, None, -32601)]
    assert server.protocol._methods == {}


def test_an_answer_after_giving_up_is_dropped_not_a_crash():
    given_up: list[Any] = []

    class Recording(HookedProtocol):
        def response_after_giving_up(self, msg_id: Any) -> None:
            given_up.append(msg_id)

    protocol = hooked_server(Recording).protocol
    waiting: Future[Any] = Future()
    waiting.cancel()
    protocol._request_futures["late"] = waiting
    protocol._handle_response("late", {"applied": True})
    assert given_up == ["late"] and "late" not in protocol._request_futures

    plain = LanguageServer("pinned", "0").protocol
    plain._request_futures["late"] = waiting
    try:
        plain._handle_response("late", {"applied": True})
    except InvalidStateError:
        pass
    else:
        pytest.fail(moved("an answer to a cancelled request no longer raises InvalidStateError: the "
                          "`_handle_response` override may go", 3))


def test_notifications_without_a_handler_reach_the_hook():
    unhandled: list[str] = []

    class Recording(HookedProtocol):
        def notification_unhandled(self, method: str) -> None:
            unhandled.append(method)

    server = hooked_server(Recording)
    seen = []
    server.feature(types.TEXT_DOCUMENT_DID_SAVE)(lambda ls, params: seen.append(params))
    server.protocol._handle_notification(types.TEXT_DOCUMENT_WILL_SAVE, None)
    server.protocol._handle_notification(types.TEXT_DOCUMENT_DID_SAVE, "saved")
    assert unhandled == [types.TEXT_DOCUMENT_WILL_SAVE] and seen == ["saved"]


def test_initialize_answers_with_the_chosen_encoding_and_experimental_capabilities():
    class Choosing(HookedProtocol):
        def position_encoding_for(self, offered: list[str]) -> str:
            assert offered == ["utf-16", "utf-32", "utf-8"]
            return "utf-8"

        def experimental_capabilities(self) -> Any:
            return {"pinned": True}

    protocol = hooked_server(Choosing).protocol
    general = types.GeneralClientCapabilities(position_encodings=["utf-16", "utf-32", "utf-8"])
    params = types.InitializeParams(capabilities=types.ClientCapabilities(general=general), process_id=None)
    with pytest.raises(StopIteration) as stopped:
        next(protocol.lsp_initialize(params))
    capabilities = stopped.value.value.capabilities
    assert capabilities.position_encoding == "utf-8", moved("pygls no longer answers with the encoding the client's "
                                                            "list offers first", 11)
    assert capabilities.experimental == {"pinned": True}


def test_open_documents_pass_to_the_handlers_without_a_copy_in_pygls():
    server = hooked_server()
    opened = []
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(lambda ls, params: opened.append(params.text_document.uri))
    protocol = server.protocol
    protocol.handle_message(protocol.structure_message({"jsonrpc": "2.0", "method": types.TEXT_DOCUMENT_DID_OPEN,
                                                        "params": {"textDocument": {
                                                            "uri": "file:///a.py", "languageId": "python",
                                                            "version": 1, "text": "x = 1\n"}}}))
    assert opened == ["file:///a.py"]
    with pytest.raises(RuntimeError):  # pygls' workspace was never made, let alone given the document
        _ = protocol.workspace


def test_has_feature_sees_registered_handlers_only():
    server = hooked_server()
    assert not pygls_private.has_feature(server, types.TEXT_DOCUMENT_COMPLETION)
    server.feature(types.TEXT_DOCUMENT_COMPLETION)(lambda ls, params: None)
    assert pygls_private.has_feature(server, types.TEXT_DOCUMENT_COMPLETION)
    assert not pygls_private.has_feature(server, types.INITIALIZE)  # pygls' own
    assert server.protocol.handles(types.INITIALIZE) and server.protocol.handles(types.CANCEL_REQUEST)


def test_lsprotocol_range_errors_name_the_field_and_rule():
    with pytest.raises(Exception) as caught:
        converters.get_converter().structure({"line": -1, "character": 0}, types.Position)
    found = list(pygls_private.out_of_range(caught.value))
    assert found == [("line", "should be in range [0:2147483647]")], (
        f"lsprotocol's integer validators now say {caught.value!r} (use 16 in pygls_private.py's docstring)")


def test_wire_names_are_lsprotocols():
    start = types.Position(0, 0)
    item = types.CallHierarchyItem(name="f", kind=types.SymbolKind.Function, uri="file:///a.py",
                                   range=types.Range(start, start), selection_range=types.Range(start, start))
    cases = [(types.CallHierarchyIncomingCall(from_=item, from_ranges=[]), ["from_", "from_ranges"]),
             (types.TextDocumentContentChangePartial(range=types.Range(start, start), text="", range_length=0),
              ["range", "range_length", "text"])]
    for value, attributes in cases:
        on_the_wire = sorted(converters.get_converter().unstructure(value))
        assert sorted(pygls_private.wire_name(a) for a in attributes) == on_the_wire, (
            f"lsprotocol now names {attributes} as {on_the_wire} (use 17 in pygls_private.py's docstring)")


# --- no private part of pygls outside pygls_private.py ------------------------------------------


def pygls_private_names() -> set[str]:
    server = LanguageServer("pinned", "0")
    owners = (JsonRPCProtocol, LanguageServerProtocol, JsonRPCServer, LanguageServer, FeatureManager, Progress,
              server, server.protocol, server.protocol.fm, server.protocol.progress)
    names = {n for owner in owners for n in dir(owner) if n.startswith("_") and not n.startswith("__")}
    return names | {"fm"}


def private_uses(path: Path, names: set[str]) -> list[str]:
    """`file:line: name` for each private name of pygls read, or overridden in a class (a
    built-in handler included), in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in names:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.ClassDef):
            found += [(f.lineno, f.name) for f in node.body if isinstance(f, ast.FunctionDef)
                      and (f.name in names or f.name in BUILT_IN)]
        elif isinstance(node, ast.ImportFrom) and any(a.name == "lsp_method" for a in node.names):
            found.append((node.lineno, "lsp_method"))
    return [f"{path.relative_to(SERVER.parent)}:{line}: {name}" for line, name in found]


def test_no_other_module_touches_pygls_private_parts():
    names = pygls_private_names()
    outside = [use for path in sorted(SERVER.rglob("*.py")) if path != MODULE for use in private_uses(path, names)]
    assert outside == [], ("pygls' private parts used outside margin/lsp/pygls_private.py (give them a hook "
                           "there, with its upstream change in the docstring): " + ", ".join(outside))


def test_every_private_part_pygls_private_uses_is_pinned():
    pinned = {name for _, name, _, _ in SIGNATURES} | set(PROTOCOL_ATTRIBUTES) | set(SERVER_ATTRIBUTES)
    used = {use.rsplit(": ", 1)[1] for use in private_uses(MODULE, pygls_private_names())} - {"lsp_method"}
    assert used <= pinned, f"pin these in this test too: {sorted(used - pinned)}"


@pytest.mark.parametrize("cls", [HookedProtocol, MarginProtocol])
def test_margins_own_names_are_not_pyglss(cls):
    """A name pygls starts to define would be shadowed silently: when pygls has its own
    `send_response` or `server`, use it instead of Margin's."""
    overrides = {name for _, name, _, _ in SIGNATURES} | {"set_writer", "structure_message", "handle_message",
                                                          "__init__", "__doc__", "__module__", "__annotations__"}
    added = set(vars(cls)) - overrides - {"_methods"}
    shadowed = sorted(name for name in added if hasattr(LanguageServerProtocol, name))
    assert shadowed == [], f"pygls {PYGLS} now defines {shadowed}: use pygls' own (see margin/lsp/pygls_private.py)"
