"""The agent's own time per step (issue #48): through the real margin-lsp process, against the
loopback fake answering at once, in an agent thread that already holds N steps.

Target: Margin's time per step, median, <= 10 ms beside the model's: a step's share of a whole
`margin/agent` turn (the request written on the server's stdin to its answer read on stdout,
divided by its steps) less the same model request sent straight to the fake (the body Margin
sent, posted again with httpx, its connection kept open). Each step of the timed turns reads
another file of the workspace (a result to count, store and later show as a pointer), and the
thread grows as the rounds go.

Held exactly (load cannot change them): each step sent exactly one model request; every prompt
within the window (its exact count <= the limit the result reports); the older results shown as
pointers. Printed for information: what offering the eight tools costs in each action protocol
(o200k tokens: native definitions, the JSON-action schema, the tools in words).

    .venv/bin/python benchmarks/bench_agent.py [--steps N] [--rounds N] [--per-turn N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import httpx
from tests.e2e.raw_lsp import RawClient, raw_client
from tests.fakes.fake_openai import FakeBackend, reply

from timing import finish, verdict

TARGET_MS = 10.0
WINDOW = 32768


def action(tool: str, **args: Any) -> Any:
    return reply(json.dumps({"tool": tool, "args": args}), chunk_size=64)


def workspace(root: Path, files: int) -> None:
    root.mkdir()
    for i in range(files):
        body = "".join(f"def helper_{i}_{j}(value):\n    return value * {j} + {i}\n\n" for j in range(12))
        (root / f"mod_{i:03d}.py").write_text(f'"""Module {i}."""\n\n{body}')
    subprocess.run(["git", "init", "-q", str(root)], check=True)


async def turn(client: RawClient, fake: FakeBackend, thread: str | None, files: list[str]) -> tuple[dict[str, Any], float]:
    fake.script(*[action("read", path=name) for name in files], action("finish", answer="read them"))
    started = time.perf_counter()
    result = await client.request("margin/agent", {"task": f"read {len(files)} files",
                                                   **({"threadId": thread} if thread else {})})
    return result, time.perf_counter() - started


def tools_tokens() -> dict[str, int]:
    import tiktoken

    from margin.core.agent import tools
    from margin.core.tokens.assets import openai_encoding_args

    encoding = tiktoken.Encoding(**openai_encoding_args("o200k_base"))

    def count(value: Any) -> int:
        return len(encoding.encode_ordinary(value if isinstance(value, str) else json.dumps(value)))

    return {"native definitions": count(tools.native()), "JSON-action schema (a grammar holds it)": count(tools.action_schema()),
            "in words (JSON actions)": count(tools.described(fenced=False)), "in words (text actions)": count(tools.described())}


async def main(steps: int, rounds: int, per_turn: int) -> int:
    with tempfile.TemporaryDirectory() as tmp, FakeBackend(
            props={"default_generation_settings": {"n_ctx": WINDOW}},
            models=[{"id": "fake-model", "owned_by": "llamacpp"}]) as fake:
        root = Path(tmp) / "ws"
        workspace(root, steps + rounds * per_turn + 20)
        names = sorted(p.name for p in root.glob("mod_*.py"))
        env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(Path(tmp) / "t.db"),
               "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", "MARGIN_RETRIEVAL": "false",
               "MARGIN_LOG_LEVEL": "WARNING"}
        async with raw_client(env, capabilities={"workspace": {"applyEdit": True}}, root_uri=root.as_uri()) as client:
            thread, used = None, 0
            while used < steps:  # the thread's first N steps, 15 a turn (under the step cap)
                batch = names[used:used + min(15, steps - used)]
                result, _ = await turn(client, fake, thread, batch)
                assert result["stopped"] == "finished", result["why"]
                thread, used = result["threadId"], used + len(batch)
            async with httpx.AsyncClient(timeout=30) as direct:
                per_step, model, prompt_ok, one_each = [], [], True, True
                for _ in range(rounds):
                    before = len(fake.requests)
                    batch = names[used:used + per_turn]
                    used += per_turn
                    result, seconds = await turn(client, fake, thread, batch)
                    sent = fake.requests[before:]
                    one_each &= len(sent) == len(result["steps"]) == per_turn + 1
                    prompt_ok &= all(s["promptTokens"] <= result["limit"] for s in result["steps"])
                    body = sent[-2]
                    fake.script(*[action("finish", answer="x")] * 3)
                    times = []
                    for _ in range(3):
                        started = time.perf_counter()
                        async with direct.stream("POST", f"{fake.base_url}/chat/completions", json=body) as answer:
                            async for _chunk in answer.aiter_bytes():
                                pass
                        times.append(time.perf_counter() - started)
                    direct_s = statistics.median(times)
                    per_step.append(seconds / len(result["steps"]))
                    model.append(direct_s)
            pointers = "[t1 read " in json.dumps(fake.requests[-4]["messages"])
    step_ms = statistics.median(per_step) * 1000
    model_ms = statistics.median(model) * 1000
    own_ms = step_ms - model_ms
    print(f"agent step, a thread of {steps}+ steps, {rounds} turns of {per_turn} reads and a finish")
    print(f"  a step through margin-lsp   median {step_ms:7.2f} ms")
    print(f"  the model request direct    median {model_ms:7.2f} ms")
    print(f"  Margin's own time per step  {own_ms:7.2f} ms (target <= {TARGET_MS:g}) "
          f"{verdict(own_ms, TARGET_MS, kind='time', what='own time per step (ms)')}")
    print(f"  one model request a step: {verdict(0 if one_each else 1, 0, kind='exact', what='requests per step')}")
    print(f"  every prompt within its limit: {verdict(0 if prompt_ok else 1, 0, kind='exact', what='prompts over')}")
    print(f"  older results shown as pointers: {verdict(0 if pointers else 1, 0, kind='exact', what='pointers')}")
    print("tools offered, o200k tokens:")
    for name, tokens in tools_tokens().items():
        print(f"  {name:<40} {tokens:5d}")
    return finish()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50, help="steps the thread holds before the timed turns")
    parser.add_argument("--rounds", type=int, default=10, help="timed turns")
    parser.add_argument("--per-turn", type=int, default=10, help="reads in each timed turn")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.steps, args.rounds, args.per_turn)))
