#!/usr/bin/env bash
# Installs what the Emacs end-to-end test needs: the Debian packages emacs-nox (GNU Emacs 28)
# and elpa-eglot (eglot 1.9), with sudo when not root. Idempotent: a second run installs
# nothing. Prints the emacs binary on stdout when done.
# With --check, installs nothing: prints the binary and exits 0 when everything is installed,
# else exits 1.
set -euo pipefail

DEB_PACKAGES=(emacs-nox elpa-eglot)

missing_debs() {
  local pkg
  for pkg in "${DEB_PACKAGES[@]}"; do
    if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]; then
      echo "$pkg"
    fi
  done
}

missing="$(missing_debs)"
if [ -z "$missing" ] && [ -x /usr/bin/emacs ]; then
  echo /usr/bin/emacs
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "missing Debian packages: $(echo $missing): run scripts/install-emacs.sh" >&2
  exit 1
fi

sudo=()
if [ "$(id -u)" != 0 ]; then
  sudo=(sudo)
fi
echo "installing Debian packages: $(echo $missing)" >&2
"${sudo[@]}" apt-get update -qq >&2
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends $missing >&2
test -x /usr/bin/emacs
echo "emacs: /usr/bin/emacs ($(/usr/bin/emacs --version | head -1))" >&2
echo /usr/bin/emacs
