"""The layers stay apart: nothing under server/margin/core imports pygls, lsprotocol, httpx or
aiosqlite, directly or through anything it imports; nothing under server/margin/services
imports an adapter (the composition root, margin.wiring, plugs them in)."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import margin.core

FORBIDDEN = ("pygls", "lsprotocol", "httpx", "aiosqlite", "mcp")
CORE = Path(margin.core.__file__).parent


def core_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages([str(CORE)], prefix="margin.core."))


def test_core_has_modules_to_check():
    assert {"margin.core.vfs", "margin.core.settings", "margin.core.llm"} <= set(core_modules())


def test_importing_every_core_module_loads_no_adapter_library():
    script = (
        "import importlib, json, sys\n"
        f"for name in {core_modules()!r}: importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))\n"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", script], check=True,
                                       capture_output=True, text=True).stdout)
    assert loaded == []


def test_no_core_source_file_names_an_adapter_library():
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def imported_names(path: Path) -> list[str]:
    """The modules a source file imports: `import` statements, and the names given to
    `deferred.module(...)` or `importlib.import_module(...)`."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) \
                and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("module", "import_module"):
            names.append(node.args[0].value)
    return names


def test_no_service_imports_an_adapter():
    """Services reach outside things through ports (core); margin.wiring plugs the adapters in."""
    services = CORE.parent / "services"
    offenders = [f"{path.name}: {name}" for path in sorted(services.rglob("*.py")) for name in imported_names(path)
                 if name == "margin.adapters" or name.startswith("margin.adapters.")]
    assert offenders == []


def test_the_adapter_import_check_sees_every_way_of_importing(tmp_path):
    source = tmp_path / "service.py"
    source.write_text("import margin.adapters.sqlite_store\nfrom margin import adapters\n"
                      "from margin.adapters.local_files import LocalFolderFiles\n"
                      "from margin import deferred\nscan = deferred.module('margin.adapters.workspace_scan')\n")
    assert [n for n in imported_names(source) if n.startswith("margin.adapters")] == [
        "margin.adapters.sqlite_store", "margin.adapters", "margin.adapters.local_files",
        "margin.adapters.local_files.LocalFolderFiles", "margin.adapters.workspace_scan"]


MAX_MODULE_LINES = 400
"""A module past this has more than one job: split it (ARCHITECTURE.md, "one job per module")."""


def test_no_module_is_over_the_size_where_it_has_more_than_one_job():
    package = CORE.parent
    large = {str(path.relative_to(package)): n for path in package.rglob("*.py")
             if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert large == {}, f"split these modules: {large}"


def test_every_lsp_handler_module_registers_its_own_handlers():
    from margin.lsp import handlers

    modules = sorted(p.stem for p in Path(handlers.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert sorted(handlers.FEATURES) == modules, "every handler module must be in handlers.FEATURES"
    for name in modules:
        module = __import__(f"margin.lsp.handlers.{name}", fromlist=["register"])
        assert callable(getattr(module, "register", None)), f"lsp/handlers/{name}.py has no register(server)"
