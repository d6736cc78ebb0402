"""margin/status: the version, the position encoding, each profile as it would run now
(backend reachable, context window, tokenizer) and the open files with their fingerprints."""

from __future__ import annotations

from typing import Any

from margin import __version__, deferred
from margin.lsp.methods import STATUS
from margin.lsp.server import MarginLanguageServer, parse_params

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
with deferred.imports():
    from margin.lsp import wire_status
    from margin.services import diagnosis


async def status(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
    request = parse_params(STATUS.params_model(), params, STATUS.name)
    app = ls.app
    roots = [ls.app.workspace.root_of(folder) for folder in ls.app.workspace.folders()]
    mcp = ls.services.mcp.status([root for root in roots if root is not None])
    reports = await diagnosis.diagnose(app.settings.current, app.backends, app.tokenizers,
                                       fresh=request.refresh, routes=app.completion_routes)
    return wire_status.StatusResult(version=__version__, position_encoding=app.files.encoding.value,
                                    profiles={r.name: wire_status.ProfileStatusModel.of(r) for r in reports},
                                    files=[wire_status.FileStatusModel.of(file) for file in app.files.files()],
                                    background=sorted(task.get_name() for task in app.background),
                                    indexes=[wire_status.IndexStatusModel.of_folder(folder, progress)
                                             for folder, progress in ls.services.retrieval.progress().items()],
                                    mcp_servers=[wire_status.McpServerStatusModel(**s) for s in mcp["servers"]],
                                    mcp_ignored=[wire_status.McpIgnoredModel(**i) for i in mcp["ignored"]],
                                    ).dump()


def register(server: MarginLanguageServer) -> None:
    server.feature(STATUS.name)(status)
