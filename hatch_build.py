"""Builds the workspace index's optional C modules into the wheel: the tokeniser
(server/margin/core/retrieval/_fastterms.c) and BM25 from postings rows
(server/margin/adapters/_fastrows.c).

With a C compiler and the Python headers (gcc and python3-dev on Debian; Xcode's command-line
tools on macOS) the wheel carries both and is tagged for this interpreter and platform; the
index then builds and answers several times faster. Without them the build says so on stderr and
makes the pure-Python wheel (py3-none-any), which gives identical results, only slower.
MARGIN_PURE_PYTHON=1 asks for the pure wheel on purpose.

An editable install (`pip install -e .`, what scripts/setup.sh does) compiles the modules next to
their sources, where the editable package imports them from (ignored by git).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MODULES = [Path("server/margin/core/retrieval/_fastterms.c"), Path("server/margin/adapters/_fastrows.c")]


def compile_extension(root: Path, source: Path, out: Path) -> str | None:
    """Compiles the module to `out`; None when it worked, else why not."""
    if os.environ.get("MARGIN_PURE_PYTHON") == "1":
        return "MARGIN_PURE_PYTHON=1"
    if sys.platform == "win32":
        return "not built on Windows"
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    # -ffp-contract=off: no multiply-add fused, so BM25 gives numpy's floats to the last bit
    command = [*compiler, "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-ffp-contract=off",
               f"-I{sysconfig.get_paths()['include']}", str(root / source), "-o", str(out)]
    if sys.platform == "darwin":
        command += ["-undefined", "dynamic_lookup"]
    try:
        result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{shlex.join(command)}: {error}"
    if result.returncode != 0:
        return f"{shlex.join(command)} exited {result.returncode}:\n{result.stderr.strip()}"
    return None


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        self._temporary = tempfile.TemporaryDirectory()
        built: dict[str, str] = {}
        for source in MODULES:
            name = source.stem + sysconfig.get_config_var("EXT_SUFFIX")
            out = root / source.parent / name if version == "editable" else Path(self._temporary.name) / name
            problem = compile_extension(root, source, out)
            if problem is not None:
                print(f"margin: {source.name} was not built, its pure-Python counterpart will be used ({problem})",
                      file=sys.stderr)
                return
            built[str(out)] = f"{source.parent.relative_to('server').as_posix()}/{name}"
        if version != "editable":  # both modules or neither: one wheel tag
            build_data["force_include"].update(built)
            build_data["pure_python"] = False
            build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        temporary = getattr(self, "_temporary", None)
        if temporary is not None:
            temporary.cleanup()
