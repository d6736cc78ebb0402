#!/usr/bin/env bash
# Installs the real MCP (Model Context Protocol) servers that Margin's MCP client is tested
# against, besides the scriptable fake tests/fakes/mcp_server.py: the reference servers
# @modelcontextprotocol/server-filesystem and @modelcontextprotocol/server-everything from npm.
# They run on the Node 24 that scripts/install-vscode-tools.sh installs (when installed), else
# on a system `node` >= 20.
# Everything goes into a cached, versioned folder, built in a temporary folder and moved into
# place in one step; a second run is a no-op.
# Prints the folder on stdout when done (use it as MARGIN_MCP_TOOLS); it holds:
#   bin/node                                                 the Node that runs the servers
#   node_modules/@modelcontextprotocol/server-filesystem     the filesystem server
#   node_modules/@modelcontextprotocol/server-everything     the everything (test) server
# and prints on stderr the command lines that start each server over stdio.
# With --check, installs nothing: prints the folder and exits 0 when everything is installed,
# else exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

FILESYSTEM_VERSION=2026.8.31   # @modelcontextprotocol/server-filesystem
EVERYTHING_VERSION=2026.8.31   # @modelcontextprotocol/server-everything
root="${MARGIN_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/margin-tools}"
dir="$root/mcp-tools-filesystem-$FILESYSTEM_VERSION-everything-$EVERYTHING_VERSION"
# The servers' entry files (their packages' `bin` fields).
filesystem_js="node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
everything_js="node_modules/@modelcontextprotocol/server-everything/dist/index.js"

# The servers' node: rechecked on every run, since the folder links to it and it may move.
node_ok() {  # node_ok PATH: it runs and is Node >= 20
  "$1" -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null
}
if [ -f "$dir/.complete" ] && node_ok "$dir/bin/node"; then
  echo "$dir"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "the MCP test servers are not installed in $dir: run scripts/install-mcp-tools.sh" >&2
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
tmp="$(mktemp -d "$root/.mcp-tools-tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cat >"$tmp/package.json" <<JSON
{
  "name": "margin-mcp-tools",
  "private": true,
  "dependencies": {
    "@modelcontextprotocol/server-filesystem": "$FILESYSTEM_VERSION",
    "@modelcontextprotocol/server-everything": "$EVERYTHING_VERSION"
  }
}
JSON
(
  cd "$tmp"
  PATH="$(dirname "$node"):$PATH" npm install --no-audit --no-fund --loglevel=error >&2
)
mkdir -p "$tmp/bin"
ln -s "$node" "$tmp/bin/node"
# Both entry files are there.
for js in "$filesystem_js" "$everything_js"; do
  [ -f "$tmp/$js" ] || { echo "npm installed no $js" >&2; exit 1; }
done
touch "$tmp/.complete"
rm -rf "$dir"
mv -T "$tmp" "$dir"
trap - EXIT

echo "node: $dir/bin/node ($("$dir/bin/node" --version))" >&2
# How to start each server over stdio (the filesystem server serves the folders it is given).
echo "filesystem: $dir/bin/node $dir/$filesystem_js ALLOWED_DIR..." >&2
echo "everything: $dir/bin/node $dir/$everything_js stdio" >&2
echo "$dir"
