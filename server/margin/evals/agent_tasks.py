"""The agent's evaluation tasks (#51; `data/agent-tasks/`, written for this project): small Python
repositories with a bug or a missing feature, a description a person would type, hidden tests
(`test_check_*.py`, written into the copy only after the turn) and a known-good trajectory.

Each task is run in a fresh copy: its files, a git repository, and a `.venv` the sandbox's
`python` comes from, with pytest in it (the agent's `run` finds `.venv/bin` first and reads
nothing of the person's: adapters/agent_run.py). The copy's `.venv` is excluded from git, so the
agent's reads and lists never show it. The hidden tests run the same way, in the sandbox.

`oracle()` plays a task's known-good trajectory through Margin's real agent core — the prompts,
the budget, the action protocol, the ledger that lets an edit touch only text read, the
confirmations — with a scripted model in place of a real one: a task the oracle fails is a
defect of Margin's path, not of a model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.core.agent.approvals import plain_command
from margin.core.agent.ports import Hands
from margin.core.fim import FimReply, FimRequest
from margin.core.llm import BackendInfo, ChatDelta, ChatReply, ChatRequest, Usage
from margin.core.where import Where
from margin.services.agent_turn import AgentAsk, AgentOutcome, Confirm, Decision, EditAnswer, ProposedEdit

DATA = Path(__file__).parent / "data" / "agent-tasks"
TEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")
"""what the copy's `.venv` needs to run pytest, copied from this Python's own"""
CHECK_COMMAND = "python -m py_compile {path}"
"""the `diagnostics` tool's check in the evaluation (agentCheckCommand)"""
TEST_PROGRAMS = ("python", "pytest")
"""commands the evaluation's policy approves (the tests, a check); any other is refused, counted"""


@dataclass(frozen=True)
class Task:
    id: str
    kind: str
    task: str
    files: dict[str, str]
    check: dict[str, str] = field(repr=False)
    oracle: tuple[dict[str, Any], ...] = field(repr=False)


def load(data: Path = DATA) -> list[Task]:
    tasks = []
    for path in sorted(data.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        tasks.append(Task(raw["id"], raw["kind"], raw["task"], dict(raw["files"]), dict(raw["check"]),
                          tuple(raw["oracle"])))
    return tasks


def prepare(task: Task, folder: Path) -> Path:
    """A fresh copy of `task`'s repository in `folder`, with its git repository and `.venv`."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, text in task.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / ".git" / "info" / "exclude").write_text(".venv/\n__pycache__/\n.pytest_cache/\n", encoding="utf-8")
    venv = folder / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    import pytest as _pytest_module  # the packages beside it are what pytest needs

    source = Path(_pytest_module.__file__).parent.parent
    for name in TEST_PACKAGES:
        found = source / name
        if found.is_dir():
            shutil.copytree(found, site / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif found.is_file():
            shutil.copy2(found, site / name)
    return folder


async def hidden_tests(task: Task, folder: Path, hands: Hands) -> tuple[bool, str]:
    """The task's hidden tests against the copy as the turn left it, in the sandbox."""
    for name, text in task.check.items():
        (folder / name).write_text(text, encoding="utf-8")
    try:
        ran = await hands.run("python -m pytest -q -p no:cacheprovider " + " ".join(sorted(task.check)), folder)
    finally:
        for name in task.check:
            (folder / name).unlink(missing_ok=True)
    return ran.ok and ran.returncode == 0, ran.text


class PolicyDoor:
    """The evaluation's person: approves every edit and the commands that run the tests
    (TEST_PROGRAMS), refuses anything else; counts what it was asked and refused. Edits are
    written through the `Hands` port's checked write, only over the text they were made on."""

    files = None

    def __init__(self, root: Path, hands: Hands) -> None:
        self.root = root
        self.hands = hands
        self.asked = 0
        self.refused = 0

    def show(self, event: dict[str, Any]) -> None:
        return None

    async def confirm(self, asked: Confirm) -> Decision:
        self.asked += 1
        words = plain_command(asked.command or "")
        if asked.command is not None and words and Path(words[0]).name in TEST_PROGRAMS:
            return "accept"
        self.refused += 1
        return "reject"

    async def apply(self, edit: ProposedEdit, ask: bool) -> EditAnswer:
        self.asked += ask
        return EditAnswer("accept", await self.hands.write(self.root / edit.path, edit.base, edit.text))


class ScriptedModel:
    """A model that answers each agent step with the next action of a script, as JSON (the
    action protocol llama.cpp's grammar holds a small model to); `finish` once the script ends."""

    def __init__(self, window: int = 32768) -> None:
        self.script: list[dict[str, Any]] = []
        self.window = window
        self.requests = 0

    async def probe(self, model: str | None = None) -> BackendInfo:
        return BackendInfo(base_url="http://oracle.invalid/v1", reachable=True, kind="llama.cpp",
                           context_window=self.window, context_window_source="the oracle", models=("oracle",),
                           tools=False)

    def _next(self) -> str:
        self.requests += 1
        step = self.script.pop(0) if self.script else {"tool": "finish", "args": {"answer": "The script ended."}}
        return json.dumps({"tool": step["tool"], "args": step["args"]}, ensure_ascii=False)

    async def complete(self, request: ChatRequest) -> ChatReply:
        return ChatReply(self._next(), "stop", Usage(0, 0))

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatDelta]:
        yield ChatDelta(self._next(), "stop", Usage(0, 0))

    async def fill(self, request: FimRequest) -> FimReply:
        raise NotImplementedError("the oracle only plays the agent")

    async def aclose(self) -> None:
        return None


@dataclass
class Played:
    task: str
    kind: str
    passed: bool
    stopped: str
    steps: int
    edits: int
    asked: int
    refused: int
    statuses: list[str]
    """each call's status, in order"""
    tests: str = ""
    """the hidden tests' output when they failed"""


async def oracle(tasks: Sequence[Task], folder: Path) -> list[Played]:
    """Every task's known-good trajectory through Margin's real agent core (a scripted model)."""
    from margin import wiring
    from margin.services.app import MarginApp
    from margin.services.registry import Services

    model = ScriptedModel()
    environ = {"MARGIN_DEFAULTS_BASE_URL": "http://oracle.invalid/v1", "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base",
               "MARGIN_DATABASE": str(folder / "threads.db"), "MARGIN_RETRIEVAL": "false",
               "MARGIN_AGENT_CHECK_COMMAND": CHECK_COMMAND, "MARGIN_DEFAULTS_MODEL": "oracle"}
    app = MarginApp.create(lambda *_: model, wiring.make_server_counter, wiring.make_store, environ,
                           wiring.LOCAL_WORKSPACE)
    hands = wiring._Hands()
    app.hands = hands
    services = Services.over(app)
    played = []
    try:
        for task in tasks:
            root = prepare(task, folder / task.id)
            app.workspace.folders = lambda root=root: [root.as_uri()]  # type: ignore[misc]
            model.script = list(task.oracle)
            door = PolicyDoor(root, hands)
            outcome: AgentOutcome = await services.agent.run(AgentAsk(task.task, Where(), folder=root.as_uri()), door)
            passed, output = await hidden_tests(task, root, hands)
            if task.kind == "nothing-to-change":
                passed = passed and not outcome.edits
            played.append(Played(task.id, task.kind, passed, outcome.stopped, len(outcome.steps), len(outcome.edits),
                                 door.asked, door.refused, [c["status"] for s in outcome.steps for c in s.calls],
                                 "" if passed else output[-1500:]))
    finally:
        await app.aclose()
    return played
