"""The wheel a user installs carries the package, the prompts folder and both commands."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tests.conftest import REPO


def test_wheel_ships_package_prompts_and_console_scripts(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(REPO)], check=True, timeout=300)
    wheel = next(tmp_path.glob("margin_lsp-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "margin/lsp/server.py" in names and "margin/core/vfs.py" in names
    shipped_prompts = {n.removeprefix("margin/prompts/") for n in names if n.startswith("margin/prompts/")}
    assert shipped_prompts == {p.name for p in (REPO / "prompts").iterdir() if p.is_file()}
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "margin-lsp = margin.lsp.main:main" in entry_points and "margin = margin.cli:main" in entry_points
    assert not any(n.startswith("tests/") for n in names)
