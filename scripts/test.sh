#!/usr/bin/env bash
# Sets up everything the tests need (Margin with its test tools, the local model server, the
# VS Code extension and a real VS Code with headless Chromium, Emacs with eglot), checks lint (ruff)
# and types (mypy, strict for margin.core) at zero findings, and runs the whole suite: unit tests,
# LSP end-to-end tests, the real llama.cpp, Neovim, VS Code and Emacs tests. Extra arguments go to
# pytest. Exits non-zero on any finding, failure, skip, or when no test ran (pytest's exit 5).
# pytest ends with the 25 slowest tests (setup, call and teardown apart), so that a CI log shows
# where the time went; a later --durations among the arguments replaces it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
bash scripts/install-model-server.sh >/dev/null
bash scripts/install-vscode-tools.sh >/dev/null
bash scripts/install-emacs.sh >/dev/null
bash scripts/build-vscode-extension.sh >/dev/null
.venv/bin/ruff check server tests benchmarks scripts hatch_build.py
.venv/bin/mypy
exec .venv/bin/python -m pytest --durations=25 "$@"
