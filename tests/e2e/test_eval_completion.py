"""`margin eval completion` as a user runs it: a real subprocess against the fake llama.cpp on
loopback answering as an oracle (the problem's own solution, so that whatever Margin's path does
to a right answer shows), and against the real llama.cpp server with Gemma 3 270M on CI's fixed
sample (the whole path, for real; its quality is not the point)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from margin.evals import infilling
from tests.conftest import clean_env
from tests.fakes.fake_openai import raw

SAMPLE = 10
"""CI's fixed sample of single-line problems against the real model: the whole path at the smallest
size that runs every part of it (the first ten of the 50 that docs/quality.md's table is from, with
its command; the whole set: docs/testing.md)"""


def margin_eval(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "margin.cli", "eval", "completion", *args], capture_output=True,
                          text=True, env=clean_env(XDG_CONFIG_HOME="/nonexistent"), timeout=timeout)


def oracle(problems: list[infilling.Problem], *, margin_right: bool = True):
    """llama.cpp's /infill answering each problem with its own solution (found by the text before
    the hole: Margin sends the lines before the cursor's and the cursor's line apart, the direct
    call sends it whole); with `margin_right` False, Margin's requests (which name their
    samplers) get a wrong answer."""
    by_prompt = {p.prompt: p for p in problems}

    def answer(body: dict) -> object:
        problem = by_prompt.get(body.get("input_prefix", "") + body.get("prompt", ""))
        content = "" if problem is None else problem.solution
        if problem is not None and "samplers" in body and not margin_right:
            content = "    pass\n" if problem.whole_lines else "None"
        return raw(json.dumps({"content": content, "tokens_evaluated": 50, "tokens_predicted": 5,
                               "stop_type": "eos", "timings": {"prompt_n": 50, "predicted_n": 5}}))
    return answer


def rows_of(results) -> list[dict]:
    """The results file: a JSON line a problem."""
    return [json.loads(line) for line in results.read_text().splitlines()]


def chosen(name: str, limit: int, seed: int) -> list[infilling.Problem]:
    return infilling.sample(infilling.load(name), limit, seed)


def test_right_answers_stay_right_through_margins_path(fake, tmp_path):
    """Single-line holes: the oracle's answers pass through Margin's route, budget and
    post-processing as they do called directly, all of them."""
    fake.answers["/infill"] = oracle(chosen("single", 12, 5))
    results = tmp_path / "results.json"
    done = margin_eval("--endpoint", fake.base_url, "--limit", "12", "--seed", "5", "--results", str(results))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "single: 12 of 1033 problems" in done.stdout
    assert re.search(r"\n  Margin \(route infill\) +12/12 100\.0% ", done.stdout), done.stdout
    assert re.search(r"\n  direct \(infill\) +12/12 100\.0% ", done.stdout), done.stdout
    assert "+0.0%  95% interval" in done.stdout and "only Margin passed 0, only direct 0" in done.stdout
    rows = rows_of(results)
    assert len(rows) == 12 and {r["margin"]["route"] for r in rows} == {"infill"}
    assert all(r["margin"]["prompt_tokens"] and r["direct"]["prompt_tokens"] == 50 for r in rows)


def test_margin_shows_a_right_answer_whole_or_a_leading_part_never_other_code(fake, tmp_path):
    """Blocks of lines and random spans: an editor's suggestion stops at the end of the block, and
    at the end of the line when the cursor is mid-line (docs/completion.md), so a hole that runs
    past them is shown in part (benchmarks/eval_completion_oracle.py measures how often on every
    problem). What is shown is the right answer or its beginning: Margin's path never makes a
    right answer into other code."""
    fake.answers["/infill"] = oracle(chosen("multi", 12, 7) + chosen("span", 12, 7))
    results = tmp_path / "results.json"
    done = margin_eval("--endpoint", fake.base_url, "--set", "multi,span", "--limit", "12", "--seed", "7",
                       "--results", str(results))
    rows = rows_of(results)
    assert len(rows) == 24 and all(r["direct"]["outcome"] == "passed" for r in rows)
    for row in rows:
        shown, right = row["margin"]["answer"].rstrip("\n"), row["expected"].rstrip("\n")
        assert right.startswith(shown), (row["task_id"], shown, right)
        if shown == right:
            assert row["margin"]["outcome"] == "passed", row
    passed = sum(r["margin"]["outcome"] == "passed" for r in rows)
    assert passed >= 12  # most are whole (the benchmark: 70% of blocks, 80% of spans)
    assert done.returncode == (1 if passed < 24 else 0), done.stdout + done.stderr


def test_an_eval_where_margin_does_worse_than_the_direct_call_fails_and_says_so(fake, tmp_path):
    fake.answers["/infill"] = oracle(chosen("single", 6, 2), margin_right=False)
    done = margin_eval("--endpoint", fake.base_url, "--limit", "6", "--seed", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Margin passed fewer problems than the direct call" in done.stderr
    assert "-100.0%" in done.stdout and "only Margin passed 0, only direct 6" in done.stdout


def test_an_interrupted_run_goes_on_where_it_stopped_and_a_results_file_is_never_overwritten(fake, tmp_path):
    problems = chosen("single", 6, 4)
    fake.answers["/infill"] = oracle(problems)
    results = tmp_path / "results.jsonl"
    first = margin_eval("--endpoint", fake.base_url, "--limit", "6", "--seed", "4", "--results", str(results))
    assert first.returncode == 0, first.stdout + first.stderr
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:3]) + lines[3][:40])  # stopped while writing the fourth
    again = margin_eval("--endpoint", fake.base_url, "--limit", "6", "--seed", "4", "--results", str(results))
    assert again.returncode == 2 and "exists: --resume goes on with the run it holds" in again.stderr
    asked = len(fake.posts)
    resumed = margin_eval("--endpoint", fake.base_url, "--limit", "6", "--seed", "4", "--results", str(results),
                          "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "3 problems · " in resumed.stderr and "(3 done before, in " in resumed.stderr
    holes = [body for path, body in fake.posts[asked:] if path == "/infill" and body.get("n_predict", 0) > 1]
    assert len(holes) == 6  # three problems asked, each by Margin and directly: the first three were not
    assert re.search(r"\n  Margin \(route infill\) +6/6 100\.0% ", resumed.stdout), resumed.stdout
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.startswith("{") and line.endswith("}")]
    assert sorted(r["task_id"] for r in rows) == sorted(p.task_id for p in problems)
    orphan = margin_eval("--endpoint", fake.base_url, "--limit", "2", "--resume")
    assert orphan.returncode == 2 and "--resume goes on with the run in --results FILE" in orphan.stderr


def test_an_unknown_set_or_an_unreachable_endpoint_is_said_plainly(fake):
    done = margin_eval("--endpoint", fake.base_url, "--set", "double")
    assert done.returncode == 2 and "margin: no set 'double'" in done.stderr
    gone = margin_eval("--endpoint", "http://127.0.0.1:9/v1", "--limit", "2")
    assert gone.returncode == 0, gone.stdout + gone.stderr  # nothing answered either side: 0 of 2 each
    assert re.search(r"\n  Margin \(route none\) +0/2 +0\.0% .* 2\n", gone.stdout), gone.stdout  # 2 with no answer
    assert re.search(r"\n  direct \(chat\) +0/2 +0\.0% .* 2\n", gone.stdout), gone.stdout


@pytest.mark.llama
@pytest.mark.timeout(3600)
def test_the_ci_sample_on_the_real_model_runs_the_whole_path_and_margin_is_not_worse(llama_server, tmp_path):
    """CI's fixed sample (SAMPLE single-line problems, seed 1) through Margin's route for the real
    Gemma 3 270M (the chat route: it has no fill-in-the-middle tokens) and the direct chat
    instruction; Margin must pass at least as many."""
    results = tmp_path / "results.json"
    done = margin_eval("--endpoint", llama_server.base_url, "--limit", str(SAMPLE), "--results", str(results),
                       timeout=3600)
    print(done.stdout)
    rows = rows_of(results)
    assert len(rows) == SAMPLE and {r["margin"]["route"] for r in rows} == {"chat"}
    assert all(r["margin"]["answer"] is not None and r["direct"]["answer"] is not None for r in rows), \
        [r["margin"]["error"] or r["direct"]["error"] for r in rows]  # every request was answered
    assert all(r["margin"]["outcome"] != "not run" and r["direct"]["outcome"] != "not run" for r in rows)
    assert done.returncode == 0, done.stdout + done.stderr  # Margin passed at least as many
