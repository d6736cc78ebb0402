"""What next-edit suggestions cost the typing user (SPEC M, issue #28), through the real
margin-lsp process.

Targets:
- inline completion latency with next edits on <= 1.1x without, measured side by side;
- at most one next-edit model call in flight per document while typing.

Two margin-lsp processes, one with `nextEdit` off and one with it on (`nextEditPauseMs` 150, so
Margin itself asks for the next edit whenever the typing pauses), each against a loopback fake
backend of its own that takes MODEL_S to answer every model call, as a small local model might.
A typing script runs on both, interleaved round by round: keys 60-120 ms apart, with a pause of
400 ms every eighth key (where the pause-triggered next edit starts, while typing goes on after
it), an inline completion asked after each key and awaited, as an editor does. Judged: the
median time from the inlineCompletion request to its answer, on against off; and the most
next-edit calls the fake ever had in flight at once (it counts them by their model name).

    .venv/bin/python benchmarks/bench_next_edit_cost.py [--rounds N] [--keys N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lsprotocol import types
from tests.e2e.lsp_client import change_doc, margin_client, open_doc, request
from tests.fakes.fake_openai import FakeBackend, reply

from timing import finish, verdict

MODEL_S = 0.05
NEXT_MODEL = "next-edit-model"
URI = "file:///ws/orders.py"
TEXT = "".join(f"def order_total_{n}(items, tax):\n    return sum(item.price for item in items) * (1 + tax)\n\n\n"
               for n in range(100))


class CountingFake(FakeBackend):
    """The fake, counting the next-edit calls it is answering at once (by their model name)."""

    def __init__(self) -> None:
        super().__init__()
        self.default = reply("```python\nvalue\n```")
        self.default.delay_s = MODEL_S
        self.in_flight = 0
        self.most_in_flight = 0
        self.next_edit_calls = 0
        self._mine = threading.local()
        self._count_lock = threading.Lock()

    def _next_step(self, body: dict[str, Any], headers: dict[str, str]) -> Any:
        self._mine.next_edit = body.get("model") == NEXT_MODEL
        if self._mine.next_edit:
            with self._count_lock:
                self.in_flight += 1
                self.next_edit_calls += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
        return super()._next_step(body, headers)

    def _handler_class(self) -> Any:
        base, fake = super()._handler_class(), self

        class Counting(base):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                fake._mine.next_edit = False
                try:
                    super().do_POST()
                finally:
                    if fake._mine.next_edit:
                        with fake._count_lock:
                            fake.in_flight -= 1

        return Counting


async def typing(client: Any, keys: int, seed: int) -> list[float]:
    """The typing script; the latency of each inline completion."""
    rng = random.Random(seed)
    open_doc(client, URI, TEXT, version=1)
    line = 4 * (10 + seed)  # another function each round: nothing answered from the cache
    version, column, latencies = 1, len(f"def order_total_{10 + seed}"), []
    for key in range(keys):
        version += 1
        change_doc(client, URI, version, ((line, column, line, column), "x"))
        column += 1
        started = time.perf_counter()
        await request(client, "textDocument/inlineCompletion", {
            "textDocument": {"uri": URI, "version": version}, "position": {"line": line, "character": column},
            "context": {"triggerKind": 2}})
        latencies.append(time.perf_counter() - started)
        await asyncio.sleep(0.4 if key % 8 == 7 else rng.uniform(0.06, 0.12))
    return latencies


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keys", type=int, default=40)
    options = parser.parse_args()
    with CountingFake() as off_fake, CountingFake() as on_fake, tempfile.TemporaryDirectory() as folder:
        def env(fake: FakeBackend, on: bool) -> dict[str, str]:
            return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base",
                    "MARGIN_DATABASE": str(Path(folder) / f"{on}.db"), "MARGIN_NEXT_EDIT_ENABLED": str(on).lower(), "MARGIN_NEXT_EDIT_MODEL": NEXT_MODEL,
                    "MARGIN_NEXT_EDIT_PAUSE_MS": "150", "MARGIN_LOG_LEVEL": "WARNING"}

        latencies: dict[str, list[float]] = {"off": [], "on": []}
        async with margin_client(env=env(off_fake, False), root=Path("/ws")) as off, \
                margin_client(env=env(on_fake, True), root=Path("/ws")) as on:
            for client in (off, on):  # send the params as written here (with the document's version)
                client.converter.register_unstructure_hook(types.InlineCompletionRequest, lambda m: {
                    "id": m.id, "method": m.method, "jsonrpc": m.jsonrpc, "params": m.params})
            for round_ in range(options.rounds):
                for name, client in (("off", off), ("on", on)):
                    latencies[name] += await typing(client, options.keys, seed=round_)
                    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(URI)))
    off_p50, on_p50 = (statistics.median(latencies[name]) for name in ("off", "on"))
    ratio = on_p50 / off_p50
    asked = len(off_fake.requests)
    print(f"inline completion, {len(latencies['off'])} keys each ({asked} asked the model with next edits off), "
          f"model {MODEL_S * 1000:.0f} ms: "
          f"off p50 {off_p50 * 1000:.1f} ms, on p50 {on_p50 * 1000:.1f} ms")
    print(f"  on / off: {ratio:.2f} (target <= 1.1) {verdict(ratio, 1.1, what='completion latency, next edits on/off')}")
    print(f"next-edit model calls: {on_fake.next_edit_calls} (none with it off: {off_fake.next_edit_calls}); "
          f"most in flight at once: {on_fake.most_in_flight} (target <= 1) "
          f"{verdict(on_fake.most_in_flight, 1, kind='exact', what='next-edit calls in flight per document')}")
    if on_fake.next_edit_calls == 0:
        print("MISSED no next edit was asked for: the benchmark measured nothing")
        return 1
    return finish()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
