"""`margin doctor --probe` against the real llama.cpp server with Gemma 3 270M: every check runs
for real and comes to a verdict (what this model can do is the point, not a given answer)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import clean_env


@pytest.mark.llama
@pytest.mark.timeout(900)
def test_the_probe_tries_each_route_and_capability_on_the_real_model(llama_server, tmp_path):
    # The findings it keeps go to a data folder of its own: the other tests on the shared server
    # take the routes Margin picks without a probe.
    done = subprocess.run([sys.executable, "-m", "margin.cli", "doctor", "--probe", "--json"],
                          capture_output=True, text=True, timeout=600,
                          env=clean_env(MARGIN_DEFAULTS_BASE_URL=llama_server.base_url, MARGIN_DOCTOR_PORTS="9",
                                        MARGIN_DEFAULTS_TIMEOUT_S="120", XDG_CONFIG_HOME="/nonexistent",
                                        XDG_DATA_HOME=str(tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr
    (found,) = json.loads(done.stdout)["probes"]
    print(json.dumps(found, indent=1))  # what the model did, and how long each check took
    assert found["profiles"] == ["completion", "edit", "chat", "chatOps", "agent"] and found["contextWindow"] == 4096
    # Gemma 3 270M has no fill-in-the-middle tokens: llama.cpp refuses /infill, chat is tried
    assert found["routes"]["infill"]["works"] is False and "refused" in found["routes"]["infill"]["result"]
    assert found["routes"]["chat"]["works"] is not None
    # llama.cpp holds a reply to the schema by a grammar: the shape is honoured, right or not
    assert found["jsonSchema"]["works"] is True, found["jsonSchema"]
    assert found["tools"]["works"] is not None and found["tools"]["result"]
    # native tool calls, or else a JSON action held to the action schema by the same grammar
    assert found["agentProtocol"] in ("native", "json") and found["agent"]["works"] is True, found["agent"]
    assert found["streaming"]["works"] is True and found["firstTokenS"] > 0 and found["tokensPerS"] > 0
