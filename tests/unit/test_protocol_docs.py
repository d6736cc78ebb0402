"""docs/protocol.md, the JSON schema of each method and the VS Code client's protocol types are
generated from margin.lsp.methods and the wire models, and the committed files are the
generator's current output."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

from margin.lsp import methods
from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "generate_protocol.py"
FIX = ".venv/bin/python scripts/generate_protocol.py"


def generator():
    spec = importlib.util.spec_from_file_location("generate_protocol", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_protocol_files_are_generated_from_the_models():
    stale = [str(path.relative_to(REPO)) for path in generator().stale()]
    assert not stale, f"{', '.join(stale)} out of date with server/margin/lsp/methods.py and wire*.py: run {FIX}"


def test_check_mode_exits_zero_when_current_and_one_naming_a_stale_file(tmp_path, monkeypatch):
    run = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    module = generator()
    stale = tmp_path / "protocol.md"
    stale.write_text("an older reference\n", encoding="utf-8")
    monkeypatch.setattr(module, "REPO", tmp_path)
    monkeypatch.setattr(module, "DOC", stale)
    assert module.main(["--check"]) == 1


def test_every_method_has_a_schema_with_its_params_and_result():
    for method in methods.ALL:
        schema = json.loads(generator().schema_file(method).read_text(encoding="utf-8"))
        assert schema["title"] == method.name
        params = schema["properties"]["params"]["$ref"].rsplit("/", 1)[-1]
        assert set(schema["$defs"][params].get("properties", {})) == {
            info.alias or name for name, info in method.params_model().model_fields.items()}


def test_the_reference_documents_every_method_field_and_docstring():
    text = (REPO / "docs" / "protocol.md").read_text(encoding="utf-8")
    for method in methods.ALL:
        assert f"### {method.name}\n" in text and method.doc in text
    assert "| `partialResultToken?` |" in text and "the reply's next piece of text" in text


def test_the_client_gets_every_name_and_each_request_its_types():
    ts = (REPO / "client-vscode" / "src" / "pure" / "protocol.generated.ts").read_text(encoding="utf-8")
    for method in methods.REQUESTS:
        params, result = (generator().type_name(part.partition(":")[2]) for part in (method.params, method.result))
        assert f'  "{method.name}": {{ params: {params}; result: {result} }};' in ts
    for command in methods.COMMANDS:
        assert f'"{command.name}"' in ts
    assert "export interface ChatDelta {" in ts


def test_the_client_writes_no_method_name_of_its_own():
    """Its requests go through the generated names (src/requests.ts)."""
    sources = [p for p in (REPO / "client-vscode" / "src").rglob("*.ts") if not p.name.endswith(".generated.ts")]
    quoted = [f"{p.name}: {m.name}" for p in sources for m in methods.REQUESTS
              if f'"{m.name}"' in p.read_text(encoding="utf-8")]
    assert quoted == []
