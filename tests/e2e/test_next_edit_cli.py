"""`margin next-edit FILE LINE` as a user runs it: a real git repository with working-tree changes
(or a diff given), the fake backend on loopback answering, the suggestion printed as a diff —
by the chat route for an instruction model, by Sweep's own prompt for a Sweep model, and silence
when the answer undoes the user's edit or the profile is off."""

from __future__ import annotations

import json
import subprocess

from margin.core.next_edit import formats
from tests.fakes.fake_openai import raw, reply
from tests.unit.test_cli import margin

BEFORE = ("import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\n"
          "def perimeter(r):\n    return 2 * math.pi * r\n")
AFTER = BEFORE.replace("def area(r):", "def area(radius):")
NEXT = AFTER.replace("math.pi * r * r", "math.pi * radius * radius")


def repository(tmp_path):
    folder = tmp_path / "repo"
    folder.mkdir()
    for command in (["init", "-q"], ["config", "user.email", "a@b.c"], ["config", "user.name", "A"]):
        subprocess.run(["git", *command], cwd=folder, check=True)
    (folder / "geometry.py").write_text(BEFORE)
    subprocess.run(["git", "add", "."], cwd=folder, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "first"], cwd=folder, check=True)
    (folder / "geometry.py").write_text(AFTER)  # the user's edit, not committed
    return folder


def window_of(text: str) -> str:
    return text.rstrip("\n")  # the file is short: the window is all of it


def env(fake, tmp_path, **more: str) -> dict[str, str]:
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_NEXT_EDIT_ENABLED": "true",
            "MARGIN_DATABASE": str(tmp_path / "t.db"), **more}


def test_the_chat_route_suggests_the_edit_the_users_edit_calls_for(fake, tmp_path):
    folder = repository(tmp_path)
    fake.script(reply(f"```python\n{window_of(NEXT)}\n```"))
    done = margin("next-edit", "geometry.py", "4:18", env=env(fake, tmp_path), cwd=folder)
    assert done.returncode == 0, done.stderr
    assert "-    return math.pi * r * r\n+    return math.pi * radius * radius\n" in done.stdout
    assert "next edit at line 5 (chat route)" in done.stderr
    assert (folder / "geometry.py").read_text() == AFTER  # nothing written
    (request,) = fake.requests
    user = request["messages"][-1]["content"]
    assert "An edit the user made to geometry.py, before:\n```\ndef area(r):\n```\nafter:\n```\ndef area(radius):\n```" \
        in user
    assert f"The window of geometry.py before those edits:\n```\n{window_of(BEFORE)}\n```" in user
    assert "the cursor is on its line 4" in user and request["temperature"] == 0
    assert request["messages"][0]["role"] == "system" and "next-edit suggestion" in request["messages"][0]["content"]


def test_an_answer_that_undoes_the_users_edit_is_silence(fake, tmp_path):
    folder = repository(tmp_path)
    fake.script(reply(f"```python\n{window_of(BEFORE)}\n```"))
    done = margin("next-edit", "geometry.py", "4", env=env(fake, tmp_path), cwd=folder)
    assert done.returncode == 0 and done.stdout == ""
    assert "no suggestion: reverses the last edit" in done.stderr


def test_a_sweep_model_gets_sweeps_own_prompt_as_a_raw_completion(fake, tmp_path):
    folder = repository(tmp_path)
    fake.routes["/v1/completions"] = [raw(json.dumps({"choices": [{"text": window_of(NEXT) + "\n",
                                                                   "finish_reason": "stop"}]}))]
    done = margin("next-edit", "geometry.py", "4", cwd=folder,
                  env=env(fake, tmp_path, MARGIN_NEXT_EDIT_MODEL="sweep-next-edit-1.5b"))
    assert done.returncode == 0, done.stderr
    assert "+    return math.pi * radius * radius\n" in done.stdout and "(sweep route)" in done.stderr
    body = next(b for p, b in fake.posts if p == "/v1/completions")
    edit = formats.RecentEdit("geometry.py", "def area(r):", "def area(radius):")
    assert body["prompt"] == formats.sweep([], [edit], "geometry.py", BEFORE, AFTER)  # the windows: the whole file
    assert body["stop"] == ["<|file_sep|>", "</s>"] and body["temperature"] == 0 and body["max_tokens"] == 512


def test_a_diff_given_and_the_profile_off(fake, tmp_path):
    (tmp_path / "geometry.py").write_text(AFTER)
    patch = tmp_path / "edit.diff"
    patch.write_text("--- a/geometry.py\n+++ b/geometry.py\n@@ -4 +4 @@\n-def area(r):\n+def area(radius):\n")
    fake.script(reply(f"```python\n{window_of(NEXT)}\n```"))
    done = margin("next-edit", "geometry.py", "4", "--diff", str(patch), env=env(fake, tmp_path), cwd=tmp_path)
    assert done.returncode == 0 and "+    return math.pi * radius * radius\n" in done.stdout, done.stderr
    off = margin("next-edit", "geometry.py", "4", "--diff", str(patch), cwd=tmp_path,
                 env={"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db")})
    assert off.returncode == 1 and "Next-edit suggestions are off: set nextEdit.enabled" in off.stderr
    wrong = tmp_path / "wrong.diff"
    wrong.write_text("@@ -4 +4 @@\n-def area(x):\n+def area(y):\n")
    bad = margin("next-edit", "geometry.py", "4", "--diff", str(wrong), env=env(fake, tmp_path), cwd=tmp_path)
    assert bad.returncode != 0 and "the diff does not end at the file as it is" in bad.stderr


def test_a_zeta_model_gets_zetas_own_prompt_and_its_editable_region_is_read(fake, tmp_path):
    folder = repository(tmp_path)
    region = window_of(NEXT).replace("def area(radius):", "def area(radius):" + formats.CURSOR)
    answer = f"```geometry.py\n{formats.START_OF_FILE}\n{formats.REGION_START}\n{region}\n\n"
    fake.routes["/v1/completions"] = [raw(json.dumps({"choices": [{"text": answer, "finish_reason": "stop"}]}))]
    done = margin("next-edit", "geometry.py", "4", cwd=folder, env=env(fake, tmp_path, MARGIN_NEXT_EDIT_MODEL="zeta"))
    assert done.returncode == 0, done.stderr
    assert "-    return math.pi * r * r\n+    return math.pi * radius * radius\n" in done.stdout
    assert "(zeta route)" in done.stderr
    body = next(b for p, b in fake.posts if p == "/v1/completions")
    edit = formats.RecentEdit("geometry.py", "def area(r):", "def area(radius):", 3, "import math\n\n\n",
                              "    return math.pi * r * r\n\n\n")
    cursor = AFTER.index("def area(radius):") + len("def area(radius):")
    assert body["prompt"] == formats.zeta([edit], "geometry.py", AFTER, (0, len(AFTER)), (0, len(AFTER)), cursor)
    assert body["stop"] == [formats.REGION_END] and body["temperature"] == 0
