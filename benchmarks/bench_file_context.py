"""What a file costs in the prompt: the raw code's tokens, against seed 000's JSON envelope (how
Margin sent files before) and the file block it sends now (core.file_block), over every `.py`
file of a real project (httpx, from ../shared/data/httpx.bundle), counted with o200k; and the
tokens Margin sends over a scripted 50-turn session with 5 edited files, both ways.

Target: file context within 1.03x of the raw code's tokens.

    .venv/bin/python benchmarks/bench_file_context.py [path/to/httpx.bundle]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tests.fakes.fake_provider import WS, FakeProvider, close, fake_services
from tests.fixtures.corpus import python_chunks

from margin.core import threads
from margin.core.assemble import FileRef
from margin.core.file_block import ENVELOPE_TYPE, render_file
from margin.core.sources import base as sources
from margin.core.tokens.local import tiktoken_counter
from margin.core.vfs import Position, Range, TextChange, fingerprint
from margin.core.where import Where
from margin.services.chat import Ask
from timing import finish, verdict

BUNDLE = REPO.parent / "shared" / "data" / "httpx.bundle"
TARGET = 1.03


def envelope(file_id: str, language: str, fp: str, text: str) -> str:
    """Seed 000's JSON envelope, exactly as Margin rendered it before file blocks."""
    return json.dumps({"type": ENVELOPE_TYPE, "schema_version": 1, "file_id": file_id, "fingerprint": fp,
                       "language": language, "content": text}, ensure_ascii=False)


def python_files(bundle: Path) -> dict[str, str]:
    folder = Path(tempfile.mkdtemp(prefix="margin-httpx-"))
    subprocess.run(["git", "-c", "advice.detachedHead=false", "clone", "-q", str(bundle), str(folder / "httpx")],
                   check=True)
    root = folder / "httpx"
    return {str(p.relative_to(root)): p.read_bytes().decode("utf-8") for p in sorted(root.rglob("*.py"))}


def per_file(files: dict[str, str]) -> None:
    count = tiktoken_counter("o200k_base").count
    raw = old = new = 0
    ratios = []
    for file_id, text in files.items():
        r = count(text)
        o = count(envelope(file_id, "python", fingerprint(text), text))
        n = count(render_file(file_id, "python", fingerprint(text), text))
        raw, old, new = raw + r, old + o, new + n
        if r:
            ratios.append(n / r)
    print(f"{len(files)} .py files of httpx, o200k tokens")
    print(f"  raw code           {raw:>8}")
    print(f"  JSON envelope      {old:>8}   {old / raw:.3f}x the raw code")
    print(f"  file block         {new:>8}   {new / raw:.3f}x the raw code  ({1 - new / old:.1%} fewer than the envelope)")
    print(f"  per file, block/raw: median {statistics.median(ratios):.3f}x, max {max(ratios):.3f}x "
          f"(the header weighs most on the smallest files)")
    print(f"  target file context <= {TARGET}x the raw code: {new / raw:.3f}x  {verdict(new / raw, TARGET, kind='exact', what='file block against the raw code')}")


SESSION_WINDOW = 131072
"""Large enough that nothing is dropped either way, so the totals differ by the form alone."""


async def session(tmp: Path, render, upgrade) -> int:
    """The 50-turn, 5-file session of tests/unit/services/test_chat_session.py: tokens sent."""
    # How files are shown, for this run only: as they are rendered, and as stored ones are read.
    sources.render = render
    threads.current_form = upgrade
    provider = FakeProvider()
    services = fake_services(tmp, provider, MARGIN_CHAT_TOKENIZER="tiktoken:o200k_base",
                             MARGIN_CHAT_CONTEXT_WINDOW=str(SESSION_WINDOW), MARGIN_CHAT_MAX_OUTPUT_TOKENS="1024")
    app = services.app
    chunks = list(python_chunks(size=1500).values())
    uris = [f"{WS}/pkg/mod{i}.py" for i in range(5)]
    for i, uri in enumerate(uris):
        app.files.open(uri, "python", 1, chunks[i])
    sent = 0
    for turn in range(50):
        if turn and turn % 2 == 0:
            uri = uris[(turn // 2) % 5]
            file = app.files.get(uri)
            app.files.change(uri, file.version + 1, [TextChange(f"# edit {turn}\n", Range(Position(0, 0), Position(0, 0)))])
        outcome = await services.chat.chat(Ask(f"Turn {turn}: what does mod{turn % 5} do?", Where(uris[turn % 5])))
        sent += outcome.budget.counted
    await close(services)
    return sent


def sessions() -> None:
    original, upgrade = sources.render, threads.current_form

    def old(ref: FileRef) -> str:
        return envelope(ref.file_id, ref.file.language_id, ref.file.fingerprint, ref.file.text)

    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        before = asyncio.run(session(Path(a), old, lambda message: message))
        after = asyncio.run(session(Path(b), original, upgrade))
    sources.render = original
    threads.current_form = upgrade
    print(f"50 turns over 5 edited files (window {SESSION_WINDOW}, nothing dropped), prompt tokens sent in all")
    print(f"  JSON envelopes     {before:>8}")
    print(f"  file blocks        {after:>8}   {1 - after / before:.1%} fewer")


def main() -> int:
    bundle = Path(sys.argv[1]) if len(sys.argv) > 1 else BUNDLE
    if not bundle.exists():
        print(f"no {bundle}: pass the path of httpx.bundle, the real files this measures", file=sys.stderr)
        return 2
    per_file(python_files(bundle))
    sessions()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
