#!/usr/bin/env bash
# Sets up everything the tests need (Margin with its test tools, the local model server) and
# runs the whole suite: unit tests, LSP end-to-end tests, the real llama.cpp tests and the real
# Neovim tests. Extra arguments go to pytest. Exits non-zero on any failure, skip, or when no
# test ran (pytest's exit 5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
bash scripts/install-model-server.sh >/dev/null
exec .venv/bin/python -m pytest "$@"
