# Sourced by scripts/install-acp-tools.sh and scripts/install-mcp-tools.sh: npm packages installed
# into a cached, versioned folder, built in a temporary folder and moved into place in one step
# (a second run is a no-op), with bin/node linked to the Node they run on — the Node 24 that
# scripts/install-vscode-tools.sh installs (when installed), else a system `node` >= 20.

node_ok() {  # node_ok PATH: it runs and is Node >= 20
  "$1" -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null
}

# npm_tools_ready DIR MODE WHAT SCRIPT: when DIR is complete (its node rechecked on every run,
# since the folder links to it and it may move), prints DIR and exits 0; else with MODE --check
# says that WHAT is not installed and exits 1; else returns, to install.
npm_tools_ready() {
  if [ -f "$1/.complete" ] && node_ok "$1/bin/node"; then
    echo "$1"
    exit 0
  fi
  if [ "$2" = "--check" ]; then
    echo "$3 not installed in $1: run $4" >&2
    exit 1
  fi
}

# npm_tools_install DIR NAME VERIFY PACKAGE VERSION [PACKAGE VERSION ...]: installs the packages
# at exactly those versions, runs `VERIFY FOLDER` on the new folder (its status decides), and
# moves it into DIR.
npm_tools_install() {
  local dir="$1" name="$2" verify="$3" node="" deps="" comma=""
  shift 3
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
  while [ "$#" -ge 2 ]; do
    deps="$deps$comma
    \"$1\": \"$2\""
    comma=","
    shift 2
  done

  mkdir -p "$(dirname "$dir")"
  npm_tools_tmp="$(mktemp -d "$(dirname "$dir")/.$name-tmp.XXXXXX")"
  trap 'rm -rf "$npm_tools_tmp"' EXIT
  chmod 755 "$npm_tools_tmp"
  printf '{\n  "name": "margin-%s",\n  "private": true,\n  "dependencies": {%s\n  }\n}\n' \
    "$name" "$deps" >"$npm_tools_tmp/package.json"
  (
    cd "$npm_tools_tmp"
    PATH="$(dirname "$node"):$PATH" npm install --no-audit --no-fund --loglevel=error >&2
  )
  mkdir -p "$npm_tools_tmp/bin"
  ln -s "$node" "$npm_tools_tmp/bin/node"
  "$verify" "$npm_tools_tmp"
  touch "$npm_tools_tmp/.complete"
  rm -rf "$dir"
  mv -T "$npm_tools_tmp" "$dir"
  trap - EXIT
  echo "node: $dir/bin/node ($("$dir/bin/node" --version))" >&2
}
