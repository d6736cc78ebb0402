#!/usr/bin/env bash
# Margin end to end on this machine: install Margin and the local model server (llama.cpp with
# Gemma 3 270M), start the server on a free loopback port, and run `margin doctor` against it:
# every profile reachable, its context window read from the server, its tokenizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "Installing the local model server (the first time builds llama.cpp: ~15 minutes)..." >&2
home="$(bash scripts/install-model-server.sh | tail -n 1)"
port="$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp -t margin-llama-XXXXXX.log)"
setsid "$home/venv/bin/llama-cpp-server" -m "$home/gemma-3-270m-q4_k_m.gguf" \
  --host 127.0.0.1 --port "$port" --ctx-size 4096 >"$log" 2>&1 &
server=$!
trap 'kill -- -"$server" 2>/dev/null || kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  if .venv/bin/python -c "import httpx,sys; sys.exit(httpx.get('http://127.0.0.1:$port/health').status_code != 200)" 2>/dev/null; then
    break
  fi
  kill -0 "$server" 2>/dev/null || { echo "llama-server failed to start; see $log" >&2; exit 1; }
  sleep 1
done
echo "llama-server is up at http://127.0.0.1:$port/v1" >&2
MARGIN_DEFAULTS_BASE_URL="http://127.0.0.1:$port/v1" .venv/bin/margin doctor
