#!/usr/bin/env bash
# Installs the second, independent ACP client that `margin acp`'s end-to-end tests drive it with:
# the Agent Client Protocol's TypeScript SDK from npm (its client app, scripted by
# tests/e2e/acp/ts_client.mjs), with zod, the one peer it needs. It runs on the Node 24 that
# scripts/install-vscode-tools.sh installs (when installed), else on a system `node` >= 20.
# Everything goes into a cached, versioned folder, built in a temporary folder and moved into
# place in one step; a second run is a no-op.
# Prints the folder on stdout when done (use it as MARGIN_ACP_TOOLS); it holds:
#   bin/node                                  the Node that runs the client
#   node_modules/@agentclientprotocol/sdk     the SDK
# With --check, installs nothing: prints the folder and exits 0 when everything is installed,
# else exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

SDK_VERSION=2.4.0   # @agentclientprotocol/sdk (ACP protocol v1)
ZOD_VERSION=4.6.7   # its peer dependency (^3.25.76 || ^4.0.0), pinned so that runs are repeatable
root="${MARGIN_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/margin-tools}"
dir="$root/acp-tools-sdk-$SDK_VERSION-zod-$ZOD_VERSION"

# The client's node: rechecked on every run, since the folder links to it and it may move.
node_ok() {  # node_ok PATH: it runs and is Node >= 20
  "$1" -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null
}
if [ -f "$dir/.complete" ] && node_ok "$dir/bin/node"; then
  echo "$dir"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "the ACP test client is not installed in $dir: run scripts/install-acp-tools.sh" >&2
  exit 1
fi

node=""
if vscode_tools="$(bash scripts/install-vscode-tools.sh --check 2>/dev/null)" \
    && node_ok "$vscode_tools/bin/node"; then
  node="$(readlink -f "$vscode_tools/bin/node")"
elif command -v node >/dev/null && node_ok "$(command -v node)"; then
  node="$(readlink -f "$(command -v node)")"
else
  echo "no Node >= 20: run scripts/install-vscode-tools.sh (it installs Node 24)" >&2
  exit 1
fi
command -v npm >/dev/null || { echo "npm is missing (Debian package npm)" >&2; exit 1; }

mkdir -p "$root"
tmp="$(mktemp -d "$root/.acp-tools-tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cat >"$tmp/package.json" <<JSON
{
  "name": "margin-acp-tools",
  "private": true,
  "dependencies": {
    "@agentclientprotocol/sdk": "$SDK_VERSION",
    "zod": "$ZOD_VERSION"
  }
}
JSON
(
  cd "$tmp"
  PATH="$(dirname "$node"):$PATH" npm install --no-audit --no-fund --loglevel=error >&2
)
mkdir -p "$tmp/bin"
ln -s "$node" "$tmp/bin/node"
# The SDK loads and has the client app the driver builds on.
(cd "$tmp" && "$tmp/bin/node" --input-type=module -e \
  'const acp = await import("@agentclientprotocol/sdk"); if (typeof acp.client !== "function") process.exit(1)')
touch "$tmp/.complete"
rm -rf "$dir"
mv -T "$tmp" "$dir"
trap - EXIT

echo "node: $dir/bin/node ($("$dir/bin/node" --version))" >&2
echo "sdk:  $dir/node_modules/@agentclientprotocol/sdk ($SDK_VERSION)" >&2
echo "$dir"
