#!/usr/bin/env bash
# Ends a test run (.ci/run): exits 1 when any llama-server is still running, naming each one and
# killing it; exits 0 when none is. The tests stop every server they start (tests/llama_processes.py,
# whose check in pytest names the test that left one); this one also catches what pytest cannot
# see, such as a server left by a run that pytest itself did not survive. One left spinning slows
# every later run on the machine about tenfold. The same look at /proc as pytest's check.
#   scripts/no-llama-server-left.sh [NAME=VALUE]   only servers with NAME=VALUE in their environment
set -uo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || python=python3
exec "$python" -m tests.llama_processes "$@"
