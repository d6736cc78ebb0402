"""The wheel a user installs carries the package, the prompts folder and both commands."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
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
    # `margin eval completion` reads the HumanEval infilling sets it ships, with their licence.
    data = "margin/evals/data/human-eval-infilling/"
    assert {n.removeprefix(data) for n in names if n.startswith(data)} == {
        "HumanEval-SingleLineInfilling.jsonl.gz", "HumanEval-MultiLineInfilling.jsonl.gz",
        "HumanEval-RandomSpanInfillingLight.jsonl.gz", "LICENSE", "SOURCE.md"}
    # `margin eval edits` reads the Exercism exercises it ships, with their licence.
    data = "margin/evals/data/exercism-python/"
    assert {n.removeprefix(data) for n in names if n.startswith(data)} == {"exercises.json.gz", "LICENSE", "SOURCE.md"}
    # The C modules are compiled in (hatch_build.py); their sources are not shipped.
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    fast = sorted(n for n in names if "/_fast" in n)
    assert fast == [f"margin/adapters/_fastrows{suffix}", "margin/adapters/_fastrows.pyi",
                    f"margin/core/retrieval/_fastterms{suffix}", "margin/core/retrieval/_fastterms.pyi"], fast


def test_without_the_c_tokeniser_the_wheel_is_pure_python_and_says_why(tmp_path):
    # What a machine without a C compiler gets (MARGIN_PURE_PYTHON=1 stands in for the compiler's absence).
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
                             "-w", str(tmp_path), str(REPO)], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "MARGIN_PURE_PYTHON": "1"})
    assert result.returncode == 0, result.stderr
    assert "_fastterms.c was not built, its pure-Python counterpart will be used (MARGIN_PURE_PYTHON=1)" in \
        result.stdout + result.stderr
    wheel = next(tmp_path.glob("margin_lsp-*.whl"))
    assert wheel.name.endswith("-py3-none-any.whl")
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith((".so", ".pyd", ".c"))]
