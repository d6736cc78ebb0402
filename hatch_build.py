"""Builds the optional C tokeniser (server/margin/core/retrieval/_fastterms.c) into the wheel.

With a C compiler and the Python headers (gcc and python3-dev on Debian; Xcode's command-line
tools on macOS) the wheel carries `margin.core.retrieval._fastterms` and is tagged for this
interpreter and platform; the retrieval index then tokenises files about seven times faster.
Without them the build says so on stderr and makes the pure-Python wheel (py3-none-any), which
gives identical results, only slower. MARGIN_PURE_PYTHON=1 asks for the pure wheel on purpose.

An editable install (`pip install -e .`, what scripts/setup.sh does) compiles the module next to
its source, where the editable package imports it from (ignored by git).
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

SOURCE = Path("server/margin/core/retrieval/_fastterms.c")
TARGET = "margin/core/retrieval/_fastterms"


def compile_extension(root: Path, out: Path) -> str | None:
    """Compiles the module to `out`; None when it worked, else why not."""
    if os.environ.get("MARGIN_PURE_PYTHON") == "1":
        return "MARGIN_PURE_PYTHON=1"
    if sys.platform == "win32":
        return "not built on Windows (the pure-Python tokeniser is used)"
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    command = [*compiler, "-O2", "-fPIC", "-shared", "-fvisibility=hidden", f"-I{sysconfig.get_paths()['include']}",
               str(root / SOURCE), "-o", str(out)]
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
        name = TARGET.rsplit("/", 1)[1] + sysconfig.get_config_var("EXT_SUFFIX")
        if version == "editable":
            problem = compile_extension(root, root / SOURCE.parent / name)
        else:
            self._temporary = tempfile.TemporaryDirectory()
            out = Path(self._temporary.name) / name
            problem = compile_extension(root, out)
            if problem is None:
                build_data["force_include"][str(out)] = f"{TARGET.rsplit('/', 1)[0]}/{name}"
                build_data["pure_python"] = False
                build_data["infer_tag"] = True
        if problem is not None:
            print(f"margin: the C tokeniser was not built, the pure-Python one will be used ({problem})",
                  file=sys.stderr)

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        temporary = getattr(self, "_temporary", None)
        if temporary is not None:
            temporary.cleanup()
