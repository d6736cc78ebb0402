"""Load: 20 open documents take 10,000 incremental changes (random UTF-16 ranges: inserts,
deletes and replacements, with emoji, CJK and accents) interleaved with chat and edit-ops
requests on the fake backend. At the end every fingerprint in margin/status is the sha256 of
the client's own text, the server's memory is within 1.5x of what it was after the first
1,000 changes, and no background work is left running.

MARGIN_LOAD_CHANGES sets the number of changes (default 10,000)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
from pathlib import Path

from tests.e2e.lsp_client import change_doc, margin_client, open_doc, request, status

CHANGES = int(os.environ.get("MARGIN_LOAD_CHANGES", "10000"))
DOCS = 20
BATCH = 100
PIECES = ["x", "yz", " = ", "\n", "é", "ñandú", "😀", "👩‍💻", "漢字", "αβγ", "\t", "def f():\n    return 1\n", "🎉!"]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def position(text: str, offset: int) -> tuple[int, int]:
    """(line, UTF-16 character) of a code point offset."""
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return line, len(text[start:offset].encode("utf-16-le")) // 2


def random_change(rng: random.Random, text: str) -> tuple[tuple[int, int, int, int], str, str]:
    """A random edit of `text`: its UTF-16 range, the new text, and the text after it."""
    start = rng.randrange(len(text) + 1)
    kind = rng.random()
    end = start if kind < 0.4 else min(len(text), start + rng.randrange(1, 40))
    new = "" if 0.4 <= kind < 0.7 else "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 4)))
    if len(text) > 6000:  # keep the documents a reasonable size: delete more than is added
        new = ""
    span = (*position(text, start), *position(text, end))
    return span, new, text[:start] + new + text[end:]


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


async def test_ten_thousand_changes_with_requests_keep_every_fingerprint_and_memory_flat(fake, tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
           "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base"}
    async with margin_client(env=env, root=Path("/ws")) as client:
        pid = client._server.pid
        texts, versions = {}, {}
        for i in range(DOCS):
            uri = f"file:///ws/doc{i}.py"
            texts[uri] = "".join(f"line {n} of doc {i} — ünïcode 😀 漢字\n" for n in range(40))
            versions[uri] = 1
            open_doc(client, uri, texts[uri])
        uris = list(texts)
        baseline, sent, requests = None, 0, 0
        while sent < CHANGES:
            for _ in range(min(BATCH, CHANGES - sent)):
                uri = rng.choice(uris)
                span, new, texts[uri] = random_change(rng, texts[uri])
                versions[uri] += 1
                change_doc(client, uri, versions[uri], (span, new))
                sent += 1
            answered = await status(client)  # answered after every earlier notification was handled
            if sent % 500 == 0:
                uri = rng.choice(uris)
                if requests % 2 == 0:
                    got = await request(client, "margin/chat", {"message": f"Load check {sent}",
                                                                "textDocument": {"uri": uri}})
                    assert got["reply"] == "ok"
                else:
                    got = await request(client, "margin/editOps", {"message": f"Load edit {sent}",
                                                                   "textDocument": {"uri": uri}})
                    assert got["enabled"] is True and got["ops"] == []
                requests += 1
            if baseline is None and sent >= min(1000, CHANGES):
                baseline = rss_kb(pid)
        answered = await status(client)
        files = {f["uri"]: f for f in answered["files"]}
        for uri in uris:
            assert files[uri]["version"] == versions[uri], (uri, seed)
            assert files[uri]["fingerprint"] == sha(texts[uri]), (uri, seed)
        while (await status(client))["background"]:
            await asyncio.sleep(0.05)
        final = rss_kb(pid)
        print(f"seed {seed}: {sent} changes, {requests} requests, RSS {baseline} kB after 1,000, {final} kB at the end")
        assert final <= 1.5 * baseline, (baseline, final, seed)
