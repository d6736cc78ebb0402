#!/usr/bin/env bash
# Ends a test run (.ci/run): exits 1 when any llama-server is still running, naming each one and
# killing it; exits 0 when none is. The tests stop every server they start (tests/llama_processes.py,
# whose check in pytest names the test that left one); this one also catches what pytest cannot
# see, such as a server left by a run that pytest itself did not survive. One left spinning slows
# every later run on the machine about tenfold.
#   scripts/no-llama-server-left.sh [NAME=VALUE]   only servers with NAME=VALUE in their environment
set -uo pipefail
only="${1:-}"
left=0
for comm in /proc/[0-9]*/comm; do
  [ "$(cat "$comm" 2>/dev/null)" = llama-server ] || continue
  proc=${comm%/comm}
  if [ -n "$only" ] && ! tr '\0' '\n' <"$proc/environ" 2>/dev/null | grep -qxF -- "$only"; then
    continue
  fi
  echo "a llama-server outlived the run (killed now): pid ${proc#/proc/}: $(tr '\0' ' ' <"$proc/cmdline" 2>/dev/null | cut -c1-300)" >&2
  kill -KILL "${proc#/proc/}" 2>/dev/null || true
  left=1
done
exit "$left"
