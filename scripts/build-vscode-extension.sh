#!/usr/bin/env bash
# Builds the VS Code extension in client-vscode/: installs its npm packages (exact versions from
# package-lock.json), type-checks it, compiles its unit tests into out/, and packages
# dist/margin.vsix with @vscode/vsce. Needs Node 20+ and npm.
set -euo pipefail
cd "$(dirname "$0")/../client-vscode"
npm ci --no-audit --no-fund --loglevel=error
npx tsc -p . --noEmit
rm -rf out
npx tsc -p tsconfig.test.json
node esbuild.mjs
npx vsce package --no-dependencies --skip-license --allow-missing-repository -o dist/margin.vsix >/dev/null
echo "client-vscode/dist/margin.vsix"
