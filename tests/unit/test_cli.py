"""The `margin` command as a user runs it: a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

from margin import __version__
from tests.conftest import clean_env


def margin(*args: str, env: dict[str, str] | None = None, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "margin.cli", *args], capture_output=True, text=True,
                          env=clean_env(XDG_CONFIG_HOME="/nonexistent", **(env or {})), cwd=cwd, timeout=60)


def test_version():
    result = margin("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"margin {__version__}"


def test_doctor_reports_a_ready_backend(fake):
    result = margin("doctor", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_COMPLETION_ENABLED": "0"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8192 tokens (llama.cpp /props n_ctx)" in result.stdout
    assert "tokenizer       llama.cpp (exact)" in result.stdout
    assert "completion  (disabled)" in result.stdout
    assert "All 3 enabled profiles are ready." in result.stdout


def test_doctor_json_and_settings_file(fake, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"margin": {"defaults": {"baseUrl": fake.base_url},
                                               "chat": {"model": "gpt-5", "contextWindow": 32000}}}))
    result = margin("--settings", str(settings), "doctor", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    chat = next(p for p in report["profiles"] if p["name"] == "chat")
    assert chat["model"] == "gpt-5" and chat["context_window"] == 32000
    assert chat["tokenizer"] == "tiktoken:o200k_base" and chat["reachable"] is True
    assert str(settings) in report["settingsFrom"]


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
    assert "4 of 4 enabled profiles have a problem" in result.stdout


def test_doctor_names_a_missing_api_key(fake):
    result = margin("doctor", env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url,
                                   "MARGIN_CHAT_API_KEY_ENV": "MARGIN_TEST_KEY_THAT_IS_UNSET"})
    assert result.returncode == 1
    assert "$MARGIN_TEST_KEY_THAT_IS_UNSET (apiKeyEnv) is not set" in result.stdout


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
