"""Inline completion: `textDocument/inlineCompletion` (LSP 3.18) answers the `completion`
profile's suggestion at the cursor, with the range of auto-closed characters it rewrites when
there are any (no range: inserted at the cursor). For
editors without inline completion, `completionMenu` turns on `textDocument/completion` with the
same suggestion as one item whose `textEdit` replaces those characters (advertised at
`initialize` when the setting is on then — read before the settings are validated, by
margin.core.settings_preread — else registered dynamically where the client allows).

A completion never shows an error: no suggestion is an empty answer, and the reason is logged
(a bug with its traceback) — an error popup per keystroke would be worse than no suggestion.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from margin import deferred, logs
from margin.core.completion.code_shape import indent_of
from margin.core.file_block import fence
from margin.core.settings_preread import completion_menu as completion_menu_preread
from margin.core.vfs import Range
from margin.lsp.handlers import next_edit as next_edit_handler
from margin.lsp.pygls_private import has_feature
from margin.lsp.server import MarginLanguageServer, parse_params

if TYPE_CHECKING:
    from margin.services.completion import CompletionOutcome, CompletionRequest

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
with deferred.imports():
    from margin.lsp import convert, wire, wire_completion
    from margin.services import completion as completion_service

log = logging.getLogger(__name__)

INLINE = types.TEXT_DOCUMENT_INLINE_COMPLETION
MENU_REGISTRATION_ID = "margin.completionMenu"
_WORD = re.compile(r"[\w$]*\Z")
LABEL_CHARS = 60


async def _complete(ls: MarginLanguageServer, request: CompletionRequest) -> CompletionOutcome:
    try:
        return await ls.services.completion.complete(request)
    except Exception:  # a bug: logged in full, and the editor gets no suggestion, not an error
        log.exception("completion crashed uri=%s", logs.name(request.uri))
        return completion_service.CompletionOutcome(None, reason="Margin failed; see its log")


async def inline_completion(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(wire_completion.InlineCompletionRequestParams, params, INLINE)
    if request.context.selected_completion_info is not None:
        # The editor's completion menu has an item selected; its own suggestion comes first.
        return wire_completion.InlineCompletionListModel(items=[]).dump()
    core = request.core()
    outcome = await _complete(ls, core)
    items = []
    if outcome.suggestion is not None and outcome.range is not None:
        item = wire_completion.InlineCompletionItemModel(insert_text=outcome.suggestion.text)
        if outcome.suggestion.replaces:
            item.range = wire.RangeModel.of(outcome.range)
        items.append(item)
    # The next edit near the cursor comes after the completion: waited for only when there is no
    # completion to show, so that turning next edits on never delays one.
    near = await next_edit_handler.near_edit_item(ls, core.uri, core.version, core.position, wait=not items)
    if near is not None:
        items.append(near)
    return wire_completion.InlineCompletionListModel(items=items).dump()


def _menu_on(ls: MarginLanguageServer) -> bool:
    return ls.app.settings.current.globals.completion_menu


def _snippet(text: str) -> str:
    """`text` as a snippet that inserts exactly it (no tab stops, no variables)."""
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


async def completion(ls: MarginLanguageServer, params: types.CompletionParams) -> types.CompletionList:
    """The suggestion as a completion item, shaped for what editors do with items:

    - its edit starts at the word being typed, so editors that filter items by that word keep it;
    - it ends at the cursor: auto-closed characters after the cursor that the suggestion ends
      with are left out of it rather than replaced (Neovim's `vim.lsp.completion` never applies
      an edit past the cursor, and would double them); only a suggestion that rewrites them
      elsewhere replaces them;
    - it is a snippet when it holds whitespace and the client takes snippets (Neovim inserts a
      plain item only up to its first space), its later lines without the cursor line's
      indentation and `insertTextMode` adjustIndentation (the editor indents them);
    - the list is incomplete: the editor asks again as the user types."""
    empty = types.CompletionList(is_incomplete=True, items=[])
    if not _menu_on(ls):
        return empty
    uri, position = params.text_document.uri, convert.position(params.position)
    outcome = await _complete(ls, completion_service.CompletionRequest(uri, position))
    file = ls.app.files.get(uri)
    if outcome.suggestion is None or outcome.range is None or file is None:
        return empty
    encoding = ls.app.files.encoding
    offset = file.offset_at(position, encoding)
    typed = file.text[file.line_starts[file.position_at(offset, encoding).line]:offset]  # on the line it is on
    word = _WORD.search(typed).group()  # type: ignore[union-attr]
    start = file.position_at(offset - len(word), encoding)
    suggestion, end = outcome.suggestion.text, outcome.range.end
    closers = file.text[offset:offset + outcome.suggestion.replaces]
    if closers and suggestion.endswith(closers) and suggestion != closers:
        suggestion, end = suggestion[: -len(closers)], file.position_at(offset, encoding)
    text = word + suggestion
    first, _, more = text.partition("\n")
    label = first.strip()
    if len(label) > LABEL_CHARS or more:
        label = label[:LABEL_CHARS].rstrip() + "…"
    shown = word + outcome.suggestion.text
    item = types.CompletionItem(
        label=label or shown.strip()[:LABEL_CHARS], kind=types.CompletionItemKind.Text, detail="Margin",
        documentation=types.MarkupContent(types.MarkupKind.Markdown, fence(shown, file.language_id)),
        filter_text=text, sort_text="0", preselect=True, insert_text_format=types.InsertTextFormat.PlainText)
    if any(c.isspace() for c in text) and ls.can("text_document.completion.completion_item.snippet_support"):
        indent = indent_of(typed)
        lines = text.split("\n")
        if len(lines) > 1:
            lines[1:] = [line.removeprefix(indent) for line in lines[1:]]
            item.insert_text_mode = types.InsertTextMode.AdjustIndentation
        text = _snippet("\n".join(lines))
        item.insert_text_format = types.InsertTextFormat.Snippet
    item.text_edit = types.TextEdit(convert.lsp_range(Range(start, end)), text)
    return types.CompletionList(is_incomplete=True, items=[item])


class CompletionMenu:
    """Whether `textDocument/completion` is offered, kept in step with `completionMenu`."""

    def __init__(self, server: MarginLanguageServer) -> None:
        self.server = server
        self.static = False
        self.registered = False

    def _handle(self) -> None:
        if not has_feature(self.server, types.TEXT_DOCUMENT_COMPLETION):
            self.server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions())(completion)

    def at_initialize(self) -> None:
        """On at `initialize`, by a pre-read of the settings (they are validated right after the
        reply): advertised in the server's capabilities."""
        if completion_menu_preread(self.server.app.environ, self.server.initialization_options):
            self._handle()
            self.static = True

    def settings_changed(self) -> None:
        """Turned on or off later, or found otherwise at `initialized` than the pre-read at
        `initialize` said (a source rejected for another invalid value): registered or
        unregistered, where the client allows it."""
        wanted = _menu_on(self.server)
        if self.static:
            if not wanted:
                log.info("completionMenu is off but completion was advertised at initialize; "
                         "it answers nothing while the setting is off")
            return
        if wanted == self.registered:
            return
        if not self.server.can("text_document.completion.dynamic_registration"):
            if wanted:
                log.info("completionMenu is on but the client cannot register completion now; "
                         "it takes effect when the editor restarts the server")
            return
        self._handle()
        self.registered = wanted
        if wanted:
            registration = types.Registration(MENU_REGISTRATION_ID, types.TEXT_DOCUMENT_COMPLETION,
                                              types.CompletionRegistrationOptions(document_selector=None))
            self.server.client_register_capability(types.RegistrationParams([registration]))
        else:
            unregistration = types.Unregistration(MENU_REGISTRATION_ID, types.TEXT_DOCUMENT_COMPLETION)
            self.server.client_unregister_capability(types.UnregistrationParams([unregistration]))


def register(server: MarginLanguageServer) -> None:
    server.feature(INLINE, types.InlineCompletionOptions())(inline_completion)
    menu = CompletionMenu(server)
    server.on_initialize.append(menu.at_initialize)
    server.on_settings_changed.append(menu.settings_changed)
