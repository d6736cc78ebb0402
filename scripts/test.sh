#!/usr/bin/env bash
# Sets up everything the tests need (Margin with its test tools, the local model server, the
# VS Code extension and a real VS Code with headless Chromium, the ACP TypeScript SDK's client,
# Emacs with eglot, bubblewrap for the sandbox), checks lint (ruff) and types (mypy, strict for
# margin.core) at zero findings, and runs the whole suite: unit tests,
# LSP end-to-end tests, the real llama.cpp, Neovim, VS Code and Emacs tests. Extra arguments go to
# pytest. Exits non-zero on any finding, failure, skip, or when no test ran (pytest's exit 5).
# Each step's time is printed as it ends; pytest ends with the 25 slowest tests (setup, call and
# teardown apart; a later --durations among the arguments replaces it) and each tier's time, so
# that a CI log shows where the time went. A whole run (no arguments) fails when pytest takes
# longer than MARGIN_TEST_TIME_LIMIT seconds (set below; docs/testing.md), every test passed or not.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
step() {  # step NAME COMMAND...: run it, then print how long it took
  local name=$1 at=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - at)) s" >&2
}
step "set-up" bash scripts/setup.sh --test
step "the model server" bash -c 'bash scripts/install-model-server.sh >/dev/null'
step "VS Code's tools" bash -c 'bash scripts/install-vscode-tools.sh >/dev/null'
step "ACP's client" bash -c 'bash scripts/install-acp-tools.sh >/dev/null'
step "MCP servers" bash -c 'bash scripts/install-mcp-tools.sh >/dev/null'
step "Emacs" bash -c 'bash scripts/install-emacs.sh >/dev/null'
step "the sandbox" bash -c 'bash scripts/install-sandbox.sh >/dev/null'
step "the VS Code extension" bash -c 'bash scripts/build-vscode-extension.sh >/dev/null'
step "ruff" .venv/bin/ruff check server tests benchmarks scripts hatch_build.py
step "mypy" .venv/bin/mypy
echo "test.sh: everything before pytest took $((SECONDS - started)) s" >&2
if [ $# -eq 0 ]; then
  # The whole suite's limit, quiet and busy (tests/time_budget.py): CI's budget is 45 minutes end
  # to end on a quiet two-core machine and 60 with its other core busy, less a few minutes of
  # set-up on a machine with its tools cached.
  export MARGIN_TEST_TIME_LIMIT="${MARGIN_TEST_TIME_LIMIT:-2500,3300}"
fi
exec .venv/bin/python -m pytest --durations=25 "$@"
