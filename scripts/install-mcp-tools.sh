#!/usr/bin/env bash
# Installs the real MCP (Model Context Protocol) servers that Margin's MCP client is tested
# against, besides the scriptable fake tests/fakes/mcp_server.py: the reference servers
# @modelcontextprotocol/server-filesystem and @modelcontextprotocol/server-everything from npm.
# They run on the Node 24 that scripts/install-vscode-tools.sh installs (when installed), else
# on a system `node` >= 20.
# Everything goes into a cached, versioned folder, built in a temporary folder and moved into
# place in one step; a second run is a no-op (scripts/lib/npm-tools.sh).
# Prints the folder on stdout when done (use it as MARGIN_MCP_TOOLS); it holds:
#   bin/node                                                 the Node that runs the servers
#   node_modules/@modelcontextprotocol/server-filesystem     the filesystem server
#   node_modules/@modelcontextprotocol/server-everything     the everything (test) server
# and prints on stderr the command lines that start each server over stdio.
# With --check, installs nothing: prints the folder and exits 0 when everything is installed,
# else exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/npm-tools.sh

FILESYSTEM_VERSION=2026.8.31   # @modelcontextprotocol/server-filesystem
EVERYTHING_VERSION=2026.8.31   # @modelcontextprotocol/server-everything
root="${MARGIN_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/margin-tools}"
dir="$root/mcp-tools-filesystem-$FILESYSTEM_VERSION-everything-$EVERYTHING_VERSION"
# The servers' entry files (their packages' `bin` fields).
filesystem_js="node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
everything_js="node_modules/@modelcontextprotocol/server-everything/dist/index.js"

npm_tools_ready "$dir" "${1:-}" "the MCP test servers are" scripts/install-mcp-tools.sh

both_entries() {  # both entry files are there
  for js in "$filesystem_js" "$everything_js"; do
    [ -f "$1/$js" ] || { echo "npm installed no $js" >&2; return 1; }
  done
}
npm_tools_install "$dir" mcp-tools both_entries \
  @modelcontextprotocol/server-filesystem "$FILESYSTEM_VERSION" \
  @modelcontextprotocol/server-everything "$EVERYTHING_VERSION"

# How to start each server over stdio (the filesystem server serves the folders it is given).
echo "filesystem: $dir/bin/node $dir/$filesystem_js ALLOWED_DIR..." >&2
echo "everything: $dir/bin/node $dir/$everything_js stdio" >&2
echo "$dir"
