#!/usr/bin/env bash
# Builds the VS Code extension in client-vscode/: installs its npm packages (exact versions from
# package-lock.json), type-checks it, compiles its unit tests into out/, bundles the Margin server
# for one VS Code target into client-vscode/bundled/ (scripts/bundle_vscode_server.py: Margin's
# wheel and its libraries for Python 3.11-3.14, from PyPI) and packages a platform-specific .vsix
# with @vscode/vsce. Needs Node 20+, npm and Python 3.11+ with pip (.venv's, else python3).
#
#   bash scripts/build-vscode-extension.sh                # this machine's target: dist/margin.vsix
#   bash scripts/build-vscode-extension.sh darwin-arm64   # another: dist/margin-darwin-arm64.vsix
#
# Targets: linux-x64 linux-arm64 alpine-x64 alpine-arm64 darwin-x64 darwin-arm64 win32-x64 win32-arm64.
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || python=python3
target=${1:-}
if [ -n "$target" ]; then
  "$python" scripts/bundle_vscode_server.py --target "$target"
  out=dist/margin-$target.vsix
else
  "$python" scripts/bundle_vscode_server.py
  target=$("$python" -c 'import json; print(json.load(open("client-vscode/bundled/manifest.json"))["target"])')
  out=dist/margin.vsix
fi
cd client-vscode
npm ci --no-audit --no-fund --loglevel=error
npx tsc -p . --noEmit
rm -rf out
npx tsc -p tsconfig.test.json
node esbuild.mjs
rm -f "$out"
npx vsce package --target "$target" --no-dependencies --skip-license --allow-missing-repository -o "$out" >/dev/null
echo "client-vscode/$out"
