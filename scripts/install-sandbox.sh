#!/usr/bin/env bash
# Installs what Margin's strong sandbox needs (margin.adapters.sandbox; docs/security.md): the
# Debian package bubblewrap, with sudo when not root, then checks that it can make a sandbox on
# this machine (the kernel must allow user namespaces). Idempotent: a second run installs
# nothing. Prints the bwrap binary on stdout when done.
# With --check, installs nothing: prints the binary and exits 0 when bubblewrap is installed,
# else exits 1.
set -euo pipefail

if [ "$(dpkg-query -W -f='${Status}' bubblewrap 2>/dev/null)" != "install ok installed" ] || [ ! -x /usr/bin/bwrap ]; then
  if [ "${1:-}" = "--check" ]; then
    echo "missing Debian package: bubblewrap: run scripts/install-sandbox.sh" >&2
    exit 1
  fi
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    sudo=(sudo)
  fi
  echo "installing Debian package: bubblewrap" >&2
  "${sudo[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends bubblewrap >&2
fi
if ! /usr/bin/bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
     --symlink usr/lib64 /lib64 -- /usr/bin/true 2>/dev/null; then
  echo "bubblewrap is installed but cannot make a sandbox here (are user namespaces turned off?):" \
       "Margin falls back to its launcher, which keeps less (docs/security.md)" >&2
  exit 1
fi
echo /usr/bin/bwrap
