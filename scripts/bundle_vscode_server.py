"""Bundles the Margin server into the VS Code extension: client-vscode/bundled/libs holds Margin
and its libraries for one VS Code target (linux-x64, darwin-arm64, ...), for every CPython from
3.11 to 3.14, so the extension runs `python -m margin.lsp.main` with PYTHONPATH=bundled/libs on
any such Python the machine has, with nothing installed (client-vscode/README.md, "The bundled
server"). Run by scripts/build-vscode-extension.sh:

    .venv/bin/python scripts/bundle_vscode_server.py --target linux-x64 [--wheel margin_lsp-*.whl]

Builds Margin's pure-Python wheel (unless one is given; the workspace index's optional C modules
would serve one Python only), resolves its dependencies for the first Python with
wheels only (`--only-binary=:all:`) for the target's platform, then installs exactly those
versions for the other Pythons and merges them: pure-Python files are the same, and each native
module's file name carries its Python (`_pydantic_core.cpython-312-x86_64-linux-gnu.so`), so the
versions sit side by side. Needs only PyPI (pip's own index settings apply).

Left out, because Margin only reads data files from them and never imports them:
mistral-common's own dependencies (pillow, pycountry, jsonschema, ...; Margin reads
mistral_common/data/tekken_*.json; numpy is bundled, as Margin's workspace index imports it) and bpe-openai's native bindings (71 MB; Margin reads
bpe_openai/data/*.tiktoken.gz). Both files are checked against their sha256 when loaded
(margin/core/tokens/assets.py), and this script counts tokens with both from the bundle when the
target is this machine's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "client-vscode" / "bundled"
LIBS = BUNDLED / "libs"
MANIFEST = BUNDLED / "manifest.json"

PYTHONS = ("3.11", "3.12", "3.13", "3.14")


def manylinux(arch: str, glibc_minor: int = 28) -> tuple[str, ...]:
    """Every manylinux tag a Linux with glibc 2.`glibc_minor` runs (pip does not expand them)."""
    return (*(f"manylinux_2_{minor}_{arch}" for minor in range(glibc_minor, 4, -1)), f"manylinux2014_{arch}",
            f"manylinux2010_{arch}", f"manylinux1_{arch}")


# pip's --platform tags per VS Code target (`vsce package --target`). glibc 2.28 is VS Code's own
# floor on Linux since 1.86, and tiktoken 0.14's Linux wheels need it; pip does take older macOS
# tags for macOS 11 (10.x wheels).
PLATFORMS: dict[str, tuple[str, ...]] = {
    "linux-x64": manylinux("x86_64"),
    "linux-arm64": manylinux("aarch64"),
    "alpine-x64": ("musllinux_1_2_x86_64",),
    "alpine-arm64": ("musllinux_1_2_aarch64",),
    "darwin-x64": ("macosx_11_0_x86_64",),
    "darwin-arm64": ("macosx_11_0_arm64",),
    "win32-x64": ("win_amd64",),
    "win32-arm64": ("win_arm64",),
}

# Installed without their own dependencies: Margin reads data files from them, never imports them.
DATA_ONLY = ("mistral-common", "bpe-openai")
# Files left out (globs under libs/): bpe-openai's native bindings, mistral-common's SentencePiece
# models (Margin reads only the Tekken files) and the libraries' command-line scripts.
PRUNED = ("bpe_openai/_bindings*", "mistral_common/data/*.model*", "bin")


def host_target() -> str:
    import platform

    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    system = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform)
    if machine is None or system is None:
        raise SystemExit(f"no VS Code target for {sys.platform} {platform.machine()}: give --target")
    return f"{system}-{machine}"


def pip(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", *args], check=True,
                   env=env)


def build_wheel(into: Path) -> Path:
    """Margin's pure-Python wheel (MARGIN_PURE_PYTHON=1): one bundle serves every Python and its
    target, where the C modules a compiler builds here would serve this machine's Python only."""
    pip("wheel", "--no-deps", str(REPO), "-w", str(into), env={**os.environ, "MARGIN_PURE_PYTHON": "1"})
    [wheel] = into.glob("margin_lsp-*-py3-none-any.whl")
    return wheel


def requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist without extras (`name<spec>`)."""
    with zipfile.ZipFile(wheel) as zf:
        [meta] = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        message = Parser().parsestr(zf.read(meta).decode())
    return [r.strip() for r in message.get_all("Requires-Dist") or [] if "extra ==" not in r]


def name_of(requirement: str) -> str:
    for i, ch in enumerate(requirement):
        if not (ch.isalnum() or ch in "-_."):
            return requirement[:i].strip().lower().replace("_", "-")
    return requirement.strip().lower().replace("_", "-")


def installed(libs: Path) -> list[str]:
    """`name==version` of every distribution in a --target folder."""
    pins = []
    for info in sorted(libs.glob("*.dist-info")):
        message = Parser().parsestr((info / "METADATA").read_text(encoding="utf-8"))
        pins.append(f"{message['Name']}=={message['Version']}")
    return pins


def target_args(target: str, python: str) -> list[str]:
    platforms = [arg for tag in PLATFORMS[target] for arg in ("--platform", tag)]
    return ["--only-binary=:all:", "--implementation", "cp", "--python-version", python, *platforms,
            "--no-compile", "--no-warn-script-location"]


def install(into: Path, target: str, python: str, wheel: Path, pins: list[str] | None) -> None:
    common = ["install", "--target", str(into), *target_args(target, python)]
    if pins is None:  # resolve: everything but the data-only packages with dependencies
        rest = [r for r in requirements(wheel) if name_of(r) not in DATA_ONLY]
        data_only = [r for r in requirements(wheel) if name_of(r) in DATA_ONLY]
        pip(*common, *rest)
        alone = into.with_name(f"{into.name}-no-deps")  # a folder of its own: both have bin/
        pip("install", "--target", str(alone), *target_args(target, python), "--no-deps", str(wheel), *data_only)
        merge(alone, into)
    else:
        pip(*common, "--no-deps", str(wheel), *[p for p in pins if not p.lower().startswith("margin-lsp==")])


def merge(source: Path, into: Path) -> None:
    """Copies the files of `source` that `into` lacks (the other Pythons' native modules)."""
    for path in sorted(source.rglob("*")):
        dest = into / path.relative_to(source)
        if path.is_dir():
            dest.mkdir(exist_ok=True)
        elif not dest.exists():
            shutil.copy2(path, dest)


def prune(libs: Path) -> None:
    for pattern in PRUNED:
        for path in libs.glob(pattern):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    for cache in list(libs.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def smoke_test(libs: Path) -> None:
    """Counts tokens with tiktoken and Tekken from the bundle alone (-I: no user site, no
    PYTHONPATH but the bundle's), and imports the server."""
    code = (
        "from margin.core.tokens.local import tekken_counter, tiktoken_counter\n"
        "import margin.lsp.main\n"
        "print(tiktoken_counter('o200k_base').count('def add(a, b):'),"
        " tekken_counter('tekken_240911', 'v7').count('def add(a, b):'))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MARGIN_"))}
    run = subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {str(libs)!r})\n{code}"],
                         env=env, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"the bundled server does not work:\n{run.stderr[-3000:]}")
    print(f"bundle smoke test: tokens {run.stdout.strip()}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=sorted(PLATFORMS), default=None,
                        help="VS Code target (default: this machine's)")
    parser.add_argument("--wheel", type=Path, help="Margin's built wheel (default: build it)")
    args = parser.parse_args()
    target = args.target or host_target()
    with tempfile.TemporaryDirectory(prefix="margin-bundle-") as tmp:
        scratch = Path(tmp)
        wheel = args.wheel or build_wheel(scratch / "wheel")
        key = hashlib.sha256(wheel.read_bytes() + Path(__file__).read_bytes() + target.encode()).hexdigest()
        if MANIFEST.exists() and LIBS.exists() and json.loads(MANIFEST.read_text()).get("key") == key:
            print(f"bundled server up to date ({target})", file=sys.stderr)
            return
        shutil.rmtree(BUNDLED, ignore_errors=True)
        first = scratch / PYTHONS[0]
        install(first, target, PYTHONS[0], wheel, None)
        pins = installed(first)
        for python in PYTHONS[1:]:
            install(scratch / python, target, python, wheel, pins)
            if installed(scratch / python) != pins:
                raise SystemExit(f"Python {python} got other versions than {PYTHONS[0]}: {installed(scratch / python)}")
            merge(scratch / python, first)
        prune(first)
        LIBS.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(first, LIBS)
    if target == host_target() and sys.version_info[:2] >= (3, 11):
        smoke_test(LIBS)
    size = sum(p.stat().st_size for p in LIBS.rglob("*") if p.is_file())
    MANIFEST.write_text(json.dumps({"target": target, "pythons": list(PYTHONS), "packages": pins, "key": key},
                                   indent=2) + "\n")
    print(f"bundled the server for {target}: {size / 1e6:.1f} MB, {len(pins)} packages", file=sys.stderr)


if __name__ == "__main__":
    main()
