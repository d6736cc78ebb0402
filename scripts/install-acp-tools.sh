#!/usr/bin/env bash
# Installs the second, independent ACP client that `margin acp`'s end-to-end tests drive it with:
# the Agent Client Protocol's TypeScript SDK from npm (its client app, scripted by
# tests/e2e/acp/ts_client.mjs), with zod, the one peer it needs. It runs on the Node 24 that
# scripts/install-vscode-tools.sh installs (when installed), else on a system `node` >= 20.
# Everything goes into a cached, versioned folder, built in a temporary folder and moved into
# place in one step; a second run is a no-op (scripts/lib/npm-tools.sh).
# Prints the folder on stdout when done (use it as MARGIN_ACP_TOOLS); it holds:
#   bin/node                                  the Node that runs the client
#   node_modules/@agentclientprotocol/sdk     the SDK
# With --check, installs nothing: prints the folder and exits 0 when everything is installed,
# else exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/npm-tools.sh

SDK_VERSION=2.4.0   # @agentclientprotocol/sdk (ACP protocol v1)
ZOD_VERSION=4.6.7   # its peer dependency (^3.25.76 || ^4.0.0), pinned so that runs are repeatable
root="${MARGIN_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/margin-tools}"
dir="$root/acp-tools-sdk-$SDK_VERSION-zod-$ZOD_VERSION"

npm_tools_ready "$dir" "${1:-}" "the ACP test client is" scripts/install-acp-tools.sh

sdk_loads() {  # the SDK loads and has the client app the driver builds on
  (cd "$1" && "$1/bin/node" --input-type=module -e \
    'const acp = await import("@agentclientprotocol/sdk"); if (typeof acp.client !== "function") process.exit(1)')
}
npm_tools_install "$dir" acp-tools sdk_loads \
  @agentclientprotocol/sdk "$SDK_VERSION" zod "$ZOD_VERSION"

echo "sdk:  $dir/node_modules/@agentclientprotocol/sdk ($SDK_VERSION)" >&2
echo "$dir"
