"""A scripted 50-turn session over 5 files, edited between turns, against the fake provider:
what Margin sends compared with a client that attaches every file to every message, and proof
that every prompt carries each included file's newest fingerprint, once, and nothing stale."""

from __future__ import annotations

from margin.core.budget import Item, Section, Window, plan, safety_margin
from margin.core.file_block import parse_file_blocks
from margin.core.tokens.local import tiktoken_counter
from margin.core.vfs import Position, Range, TextChange, fingerprint
from margin.core.where import Where
from margin.services.chat import Ask
from tests.fakes.fake_provider import WS, FakeProvider, close, fake_services
from tests.fixtures.corpus import python_chunks

TURNS = 50
WINDOW = 16384
OUTPUT = 1024


def naive_tokens(turns: list[tuple[str, list[str], str]], system: str, count) -> list[int]:
    """Prompt sizes of a client that pastes every file into every message, budgeted by the same
    engine (oldest turns dropped first)."""
    sizes = []
    for index, (question, files, _) in enumerate(turns):
        history = tuple(
            Item(f"turn {i}", count(q) + sum(count(f) for f in fs) + count(r) + 12)
            for i, (q, fs, r) in enumerate(turns[:index]))
        sections = [Section("system", (Item("system", count(system)),), required=True, is_system=True),
                    Section("history", history, protect_last=0),
                    Section("message", (Item("newest", count(question) + sum(count(f) for f in files) + 6),),
                            required=True)]
        result = plan(sections, Window(WINDOW, OUTPUT, "t", True), margin=safety_margin(WINDOW, True))
        sizes.append(result.total)
    return sizes


async def test_fifty_turns_over_five_edited_files(tmp_path):
    provider = FakeProvider()
    services = fake_services(tmp_path, provider, MARGIN_CHAT_TOKENIZER="tiktoken:o200k_base",
                             MARGIN_CHAT_CONTEXT_WINDOW=str(WINDOW), MARGIN_CHAT_MAX_OUTPUT_TOKENS=str(OUTPUT))
    app = services.app
    chunks = list(python_chunks(size=1500).values())
    uris = [f"{WS}/pkg/mod{i}.py" for i in range(5)]
    for i, uri in enumerate(uris):
        app.files.open(uri, "python", 1, chunks[i])

    ours, naive_turns, expected = [], [], []
    for turn in range(TURNS):
        if turn and turn % 2 == 0:  # an edit between turns, rotating through the files
            uri = uris[(turn // 2) % 5]
            file = app.files.get(uri)
            app.files.change(uri, file.version + 1, [TextChange(f"# edit {turn}\n", Range(Position(0, 0), Position(0, 0)))])
        question = f"Turn {turn}: what does mod{turn % 5} do with its arguments?"
        expected.append({uri: app.files.get(uri).fingerprint for uri in uris})
        outcome = await services.chat.chat(Ask(question, Where(uris[turn % 5])))
        assert outcome.budget.context_window == WINDOW and outcome.not_sent is None
        ours.append(outcome.budget.total)
        naive_turns.append((question, [app.files.get(u).text for u in uris], "ok"))

    assert len(provider.requests) == TURNS
    for turn, request in enumerate(provider.requests):
        sent = [block for message in request.messages for block in parse_file_blocks(message.content)]
        ids = [block.file_id for block in sent]
        assert len(ids) == len(set(ids)), f"turn {turn}: a file sent twice"
        for block in sent:
            assert fingerprint(block.text) == expected[turn][f"{WS}/{block.file_id}"], (
                f"turn {turn}: stale {block.file_id}")
        assert len(sent) == 5, f"turn {turn}: a file is missing"

    counter = tiktoken_counter("o200k_base")
    system = "\n\n".join(f.text for f in app.templates.load("chat_v1").fragments)
    naive = naive_tokens(naive_turns, system, counter.count)
    ratio = sum(naive) / sum(ours)
    print(f"\n50 turns, 5 files: Margin sent {sum(ours)} tokens, a resend-every-file client {sum(naive)}: "
          f"{ratio:.2f}x")
    assert ratio >= 2.0
    await close(services)
