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
# The retrieval index's C tokeniser is optional (hatch_build.py): say when this machine could not build it.
.venv/bin/python -c "from margin.core.retrieval import filedata; raise SystemExit(not filedata.fast_tokeniser())" \
  || echo "note: no C compiler or Python headers: the workspace index tokenises in Python, about 7x slower" >&2
