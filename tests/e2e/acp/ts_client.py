"""The second, independent ACP client for `margin acp`'s tests: the Agent Client Protocol's own
TypeScript SDK (@agentclientprotocol/sdk, installed by scripts/install-acp-tools.sh), scripted by
ts_client.mjs beside this file.

A scenario (a dict, written to a file for the script):
  clientCapabilities  sent as is in `initialize`, e.g. {"fs": {"readTextFile": true,
                      "writeTextFile": true}, "terminal": false}
  initialize          optional params merged over the `initialize` request's own
  cwd, mcpServers     for session/new and session/load (default: the client's cwd, [])
  sdk                 "stable" (default: `@agentclientprotocol/sdk`, ACP v1's stable schema) or
                      "unstable" (`.../unstable`): which schema the SDK checks updates against
  permissions         answers to session/request_permission, in order: "allow_once",
                      "allow_always", "reject_once", "reject_always" (the option of that kind),
                      "cancelled" (the cancelled outcome), "never" (left unanswered); a request
                      with no answer left is answered cancelled and is an error of the run;
                      one coming once the client has cancelled its turn is answered cancelled
                      and takes no answer from the list
  buffers             {absolute path: text}: the client's unsaved buffers; fs/read_text_file reads
                      them before the disk and fs/write_text_file writes into them (else to disk)
  timeoutMs           bounds the whole run (default 120000)
  steps               in order; each may carry "params", merged over the request's own params
                      (a "sessionId" of "last" there is the last session made or loaded):
    {"do": "new"}                                   session/new; its sessionId becomes "last"
    {"do": "load", "sessionId": ID | "last"}        session/load
    {"do": "list"}                                  session/list
    {"do": "prompt", "text": T, "cancelWhen": C}    session/prompt; session/cancel is sent when C
        matches: {"toolKind": K} an incoming tool_call(_update) of kind K, {"afterMs": N}
    {"do": "setMode", "modeId": M}                  session/set_mode
    {"do": "setConfig", "configId": C, "value": V}  session/set_config_option
    {"do": "raw", "method": M, "params": P}         any request, unstable or extension ones too
    {"do": "notify", "method": M, "params": P}      any notification
    {"do": "sleep", "ms": N}                        waits (for late messages to arrive)
  load, prompt, setMode and setConfig take "sessionId" (default "last").

The transcript (a dict):
  sdkVersion, initialize (its result)
  results   one per step: {"step", "do", "method", "id", "result" | "error": {code, message,
            data?}}, exactly as the agent answered (the SDK itself would turn a null result into
            {}, and a -32002 error answering session/close or session/delete into {});
            a prompt's also has "cancelSent"; a notify's has "sent": true; a sleep has none
  messages  every message from the agent in arrival order: {"seq", "type", "method", "id"?,
            "params"} with type "update" (session/update, plus "sdkParsed": whether the SDK's
            schema took it; an unknown update kind is kept here and dropped by the SDK),
            "permission", "read", "write" (plus "answer": {"result" | "error"} the client sent),
            "request", "notification" (other methods); or {"seq", "type": "response", "method":
            of the request it answers, "id", "result" | "error"}
  sent      every message to the agent, on the same seq counter: {"seq", "method", "id"?,
            "params"} or {"seq", "id", "result" | "error"}
  buffers   the buffers at the end; agentExitCode, agentSignal (after stdin was closed; killed
            with SIGTERM when not gone within 5 s); errors (protocol errors, timeout)
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
CLIENT = Path(__file__).with_name("ts_client.mjs")


class TsClientError(AssertionError):
    """The client failed (exit code, stderr); `transcript` is what it printed, if anything."""

    def __init__(self, message: str, transcript: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.transcript = transcript


def acp_tools() -> Path:
    """The folder scripts/install-acp-tools.sh installed (scripts/test.sh runs it first)."""
    check = subprocess.run(["bash", str(REPO / "scripts" / "install-acp-tools.sh"), "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, f"the ACP test client is not installed: {check.stderr}"
    return Path(check.stdout.strip().splitlines()[-1])


def run_ts_client(scenario: dict[str, Any], agent_argv: list[str], cwd: str | os.PathLike[str],
                  env: dict[str, str] | None = None, timeout: float = 150) -> dict[str, Any]:
    """Runs the scenario against the agent `agent_argv` (started by the client, in `cwd`, with
    `env`) and returns the transcript; raises TsClientError when the client exits non-zero.
    Without a timeoutMs of its own, the scenario gets one 10 s short of `timeout`, so that the
    client times out first and still prints what it saw."""
    tools = acp_tools()
    scenario = {"timeoutMs": int(max(timeout - 10, timeout / 2) * 1000), **scenario}
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="acp-scenario-") as file:
        json.dump(scenario, file)
        file.flush()
        run = subprocess.run(
            [str(tools / "bin" / "node"), str(CLIENT), file.name, "--", *agent_argv],
            cwd=cwd, env={**(os.environ if env is None else env), "MARGIN_ACP_TOOLS": str(tools)},
            capture_output=True, text=True, timeout=timeout)
    transcript: dict[str, Any] | None
    try:
        transcript = json.loads(run.stdout)
    except ValueError:
        transcript = None
    if run.returncode != 0 or transcript is None:
        raise TsClientError(f"the ACP client exited {run.returncode}:\n{run.stderr[-4000:]}", transcript)
    return transcript
