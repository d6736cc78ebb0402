"""Checks the agent evaluation's tasks (server/margin/evals/data/agent-tasks/*.json, #51): each
task's hidden tests fail on the repository as the agent finds it (pass, for a task whose right
answer is to change nothing), and pass once its known-good trajectory's edits are applied. The
edits are applied as text here (an `edit`'s `old` must occur exactly once; an empty `old` makes a
new file); `margin eval agent --oracle` plays the same trajectory through Margin's real core.

    .venv/bin/python scripts/check_agent_tasks.py [TASK_ID ...]

Exits 1 naming each task that is wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TASKS = Path(__file__).resolve().parents[1] / "server" / "margin" / "evals" / "data" / "agent-tasks"
TOOLS = {"read", "list", "search", "edit", "run", "diagnostics", "recall", "finish"}
KINDS = {"read-another-file", "search-across-files", "two-files-agree", "run-tests-to-see", "diagnostics-after-edit",
         "nothing-to-change", "noisy-test-output", "bug", "feature"}


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def hidden_tests_pass(root: Path, check: dict[str, str]) -> tuple[bool, str]:
    write(root, check)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *sorted(check)],
                          cwd=root, capture_output=True, text=True, timeout=120)
    for name in check:
        (root / name).unlink()
    return done.returncode == 0, done.stdout[-2000:]


def problems(task: dict) -> list[str]:
    found = []
    for key in ("id", "kind", "task", "files", "check", "oracle"):
        if key not in task:
            found.append(f"no {key!r}")
    if found:
        return found
    if task["kind"] not in KINDS:
        found.append(f"kind {task['kind']!r} is not one of {sorted(KINDS)}")
    if not all(name.startswith("test_check_") and "/" not in name for name in task["check"]):
        found.append("hidden tests are named test_check_*.py at the top of the repository")
    if set(task["check"]) & set(task["files"]):
        found.append("a hidden test has the name of a repository file")
    oracle = task["oracle"]
    if not oracle or oracle[-1].get("tool") != "finish":
        found.append("the oracle ends with finish")
    for i, step in enumerate(oracle):
        if step.get("tool") not in TOOLS or not isinstance(step.get("args"), dict):
            found.append(f"oracle step {i + 1} is not one of Margin's tools with its args: {step}")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        write(root, task["files"])
        unchanged = task["kind"] == "nothing-to-change"
        passed, output = hidden_tests_pass(root, task["check"])
        if passed != unchanged:
            found.append(("the hidden tests fail on the repository as given" if unchanged else
                          "the hidden tests pass on the repository as given: nothing to do") + f"\n{output}")
        for i, step in enumerate(oracle):
            if step.get("tool") != "edit":
                continue
            args = step["args"]
            path = root / args["path"]
            if args["old"] == "":
                if path.exists():
                    found.append(f"oracle step {i + 1} makes {args['path']}, which exists")
                    continue
                write(root, {args["path"]: args["new"]})
                continue
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            if text.count(args["old"]) != 1:
                found.append(f"oracle step {i + 1}: its old text occurs {text.count(args['old'])} times in {args['path']}")
                continue
            path.write_text(text.replace(args["old"], args["new"]), encoding="utf-8")
        if unchanged and any(s.get("tool") == "edit" for s in oracle):
            found.append("a nothing-to-change task's oracle edits")
        passed, output = hidden_tests_pass(root, task["check"])
        if not passed:
            found.append(f"the hidden tests fail after the oracle's edits\n{output}")
    return found


def main(ids: list[str]) -> int:
    paths = sorted(TASKS.glob("*.json"))
    if ids:
        paths = [p for p in paths if p.stem in ids]
    tasks = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:  # each task in a folder of its own
        checked = list(pool.map(problems, tasks))
    bad = 0
    for path, task, found in zip(paths, tasks, checked, strict=True):
        if task.get("id") != path.stem:
            found.append(f"its id is not its file's name ({path.stem})")
        print(f"{path.stem}: {'ok' if not found else 'WRONG'}")
        for problem in found:
            print("   " + problem.replace("\n", "\n   "))
        bad += bool(found)
    print(f"{len(paths) - bad} of {len(paths)} tasks ok")
    return 1 if bad or not paths else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
