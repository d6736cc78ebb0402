"""`margin doctor --probe` as a user runs it (a real subprocess) against the fake backend on
loopback: each route and capability tried, found working, wrong, refused or failed."""

from __future__ import annotations

import json

from tests.fakes.fake_openai import raw, reply, status, tool_calls
from tests.unit.test_cli import margin

NOT_SUPPORTED = status(501, {"error": {"code": 501, "type": "not_supported_error", "message": "not supported"}})


def probed(fake, *extra_env: tuple[str, str]) -> tuple[int, dict]:
    done = margin("doctor", "--probe", "--json", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url, **dict(extra_env)})
    report = json.loads(done.stdout)
    assert len(report["probes"]) == 1, report["probes"]  # every profile on one backend and model: probed once
    return done.returncode, report["probes"][0]


def test_a_capable_model_fills_the_hole_by_infill_answers_json_calls_tools_and_streams(fake):
    fake.routes["/infill"] = [status(200, {"content": ""}),  # the route probe: the model has FIM tokens
                              raw(json.dumps({"content": "+ b", "timings": {"prompt_n": 9}, "stop_type": "eos"}))]
    # the chat route is tried too (the last resort): it answers wrongly here
    fake.script(reply("```python\n- b\n```"), reply('{"answer": 5}'), tool_calls(("get_weather", '{"city": "Paris"}')),
                reply("1 2 3 4 5 6 7 8 9 10", usage={"prompt_tokens": 12, "completion_tokens": 20}))
    code, found = probed(fake)
    assert code == 0
    assert found["profiles"] == ["completion", "edit", "chat", "chatOps", "agent"]
    assert found["routes"]["infill"]["works"] is True and found["routes"]["infill"]["result"] == "fills the hole"
    assert found["routes"]["chat"]["works"] is False and found["fillRoute"] == "infill"
    assert found["jsonSchema"]["result"] == "honoured (and right)" and found["tools"]["result"] == "calls the tool"
    assert (found["agentProtocol"], found["agent"]["result"]) == ("native", "native tool calls")  # no request more
    assert found["streaming"]["works"] is True and found["streaming"]["result"].startswith("streams (")
    assert found["firstTokenS"] is not None and found["contextWindow"] == 8192
    sent = fake.requests[1:]
    assert sent[0]["response_format"]["json_schema"]["schema"]["required"] == ["answer"]
    assert sent[1]["tools"][0]["function"]["name"] == "get_weather" and sent[2]["stream"] is True
    assert all(body["max_tokens"] <= 48 for body in sent)  # short: a probe takes seconds


def test_a_chat_model_fills_by_chat_ignores_the_schema_answers_tools_in_text_and_a_refusal_is_named(fake):
    fake.routes["/infill"] = [NOT_SUPPORTED]
    fake.script(reply("```python\n+ b\n```"), reply("five"), reply("It is sunny in Paris."),
                reply("I will read it."),  # asked for one JSON action: the backend ignores the schema
                reply('Reading it.\n```json\n{"tool": "read", "args": {"path": "main.py"}}\n```'), reply("1 2 3"))
    code, found = probed(fake)
    assert code == 0  # what a model cannot do is a finding, not a failure of the set-up
    assert (found["agentProtocol"], found["agent"]["result"]) == ("text", "actions written in its text (and right)")
    json_action, text_action = fake.requests[-3:-1]
    assert json_action["response_format"]["json_schema"]["schema"]["oneOf"][0]["properties"]["tool"] == {"const": "read"}
    assert "response_format" not in text_action and "Call exactly one tool" in text_action["messages"][0]["content"]
    assert found["routes"]["infill"] == {"works": False, "result": "refused: the backend does not offer it",
                                         "seconds": found["routes"]["infill"]["seconds"]}
    assert found["routes"]["chat"]["result"] == "fills the hole" and found["fillRoute"] == "chat"
    assert found["jsonSchema"] == {"works": False, "result": "not honoured: the reply is not JSON",
                                   "seconds": found["jsonSchema"]["seconds"]}
    assert found["tools"]["works"] is False and found["tools"]["result"] == "offered a tool, answered in text"


def test_wrong_answers_and_failures_are_told_apart(fake):
    fake.routes["/infill"] = [NOT_SUPPORTED]
    fake.script(reply("```python\nreturn a * b\n```"), reply('{"sum": 5}'), NOT_SUPPORTED,
                reply('{"tool": "read", "args": {"path": "main"}}'), status(500, {"error": {"message": "boom"}}))
    code, found = probed(fake)
    assert code == 0
    assert found["routes"]["chat"]["works"] is False and found["routes"]["chat"]["result"].startswith("answers, wrongly")
    assert found["fillRoute"] is None
    assert found["jsonSchema"]["result"] == "not honoured: JSON of another shape"
    assert found["tools"]["result"] == "refused: the backend does not offer it"
    assert (found["agentProtocol"], found["agent"]["result"]) == ("json", "JSON actions (held to the action schema)")
    assert found["streaming"]["works"] is False and found["streaming"]["result"].startswith("failed (http_status)")


def test_the_report_in_words_and_a_backend_that_is_down(fake):
    fake.routes["/infill"] = [NOT_SUPPORTED]
    fake.script(reply("```python\n+ b\n```"), reply('{"answer": 5}'), reply("no tool"), reply("I would read main.py."),
                reply('```json\n{"tool": "open", "args": {"path": "main.py"}}\n```'), reply("1 2 3 4"))
    done = margin("doctor", "--probe", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url})
    assert "Tried on the model (--probe):" in done.stdout
    assert "  fill in the middle  infill: refused: the backend does not offer it" in done.stdout
    assert "  completion route    chat" in done.stdout and "  JSON schema         honoured (and right)" in done.stdout
    assert "  agent actions       acts in no way the agent reads (json: no action; text: unknown tool)" in done.stdout
    down = margin("doctor", "--probe", "--json", env={"MARGIN_DEFAULTS_BASE_URL": "http://127.0.0.1:9/v1"})
    found = json.loads(down.stdout)["probes"][0]
    assert down.returncode == 1 and found["routes"] == {} and found["jsonSchema"]["works"] is None
    assert found["jsonSchema"]["result"].startswith("not tried: ")


def test_what_the_probe_found_is_kept_and_margin_follows_it(fake, tmp_path):
    """Beside the thread database; then `margin doctor` (which finds the completion route as the
    language server does) takes the probed route without asking /infill again."""
    database = {"MARGIN_DATABASE": str(tmp_path / "t.db")}
    fake.routes["/infill"] = [NOT_SUPPORTED]
    fake.script(reply("```python\n+ b\n```"), reply('{"answer": 5}'), reply("It is sunny."), reply("1 2 3"))
    code, found = probed(fake, *database.items())
    assert code == 0 and found["fillRoute"] == "chat"
    kept = json.loads((tmp_path / "t.probes.json").read_text())["findings"]
    assert [(k["routes"], k["tools"]) for k in kept] == [({"infill": "refused", "chat": "works"}, "wrong")]
    asked = len([path for path, _ in fake.posts if path == "/infill"])
    done = margin("doctor", "--json", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url, **database})
    (completion,) = [p for p in json.loads(done.stdout)["profiles"] if p["name"] == "completion"]
    assert completion["completion_route"] == "chat"
    assert len([path for path, _ in fake.posts if path == "/infill"]) == asked  # not asked again
    fresh = margin("doctor", "--json", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url,
                                            "MARGIN_DATABASE": str(tmp_path / "other.db")})
    assert fresh.returncode == 0
    assert len([path for path, _ in fake.posts if path == "/infill"]) == asked + 1  # without it: asked
