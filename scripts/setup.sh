#!/usr/bin/env bash
# Sets up Margin in ./.venv (created if missing): the package, editable, with what the
# tests need when called with --test. Idempotent; quiet unless something fails.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip 2>&1 | grep -v "^WARNING: Location" >&2 || true
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".$extras" 2>&1 | grep -v "^WARNING: Location" >&2 || true
.venv/bin/python -c "import margin" # fail loudly if the install did not take
