"""The token bound: a count that a model's tokenizer does not go over, for the models Margin cannot
count exactly (the `heuristic` tokenizer).

It is an upper bound by construction for a byte-level BPE tokenizer that splits text with one of
PATTERNS before merging and whose vocabulary holds every string of the shared table
(shared_tokens.json.gz: the strings that are one token in o200k_base, cl100k_base, both Tekken
files and Gemma 3's vocabulary; scripts/build_shared_tokens.py). For such a tokenizer:

1. no token crosses a chunk of its pattern, so a text costs the sum of its chunks;
2. a chunk that is itself in the vocabulary is one token (tiktoken looks a whole chunk up before
   merging; a learned BPE vocabulary reaches each of its tokens by its own merges);
3. merging stops only when no two neighbouring tokens join into a token, so any other chunk's
   tokens split its bytes into pieces no two neighbours of which join into a table string: the
   most pieces such a split can have (`split_bound`, a dynamic programme) bounds its count;
4. a token is never shorter than a byte.

The bound is the largest sum over PATTERNS. It is checked against every exact tokenizer the
machine has on generated text of every character class (tests/unit/core/tokens/test_bound.py;
Gemma's through llama.cpp in tests/e2e/test_real_llama_tokens.py); on ordinary Python it
over-counts by about two fifths (docs/budgets.md, "Token counting").
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

import regex

TABLE_PATH = Path(__file__).with_name("shared_tokens.json.gz")

_CONTRACTIONS = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_UPPER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
_LOWER = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
PATTERNS = {
    # o200k_base (GPT-4o and later)
    "o200k": (rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+{_CONTRACTIONS}?|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*"
              rf"{_CONTRACTIONS}?|\p{{N}}{{1,3}}| ?[^\s\p{{L}}\p{{N}}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
    # Tekken (Mistral Nemo and later): o200k's shape, digits one by one
    "tekken": (rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*|\p{{N}}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
    # cl100k_base (GPT-4, Llama 3)
    "cl100k": (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
               r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"),
    # Qwen 2 and later: cl100k's shape, digits one by one
    "qwen2": rf"{_CONTRACTIONS}|[^\r\n\p{{L}}\p{{N}}]?\p{{L}}+|\p{{N}}| ?[^\s\p{{L}}\p{{N}}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
_COMPILED = [regex.compile(pattern) for pattern in PATTERNS.values()]

JOIN_CHECK = 8
"""Joins of neighbouring pieces are checked against the table up to this many bytes (checking
fewer only loosens the bound: a longer join counted as allowed is an allowance, not a risk)."""
SPLIT_LIMIT = 4096
"""Chunks longer than this (bytes) are counted at a token a byte instead of split (rare: one
run of letters that long, with no case change)."""


@lru_cache(maxsize=1)
def shared_tokens() -> frozenset[bytes]:
    return frozenset(s.encode("utf-8") for s in json.loads(gzip.decompress(TABLE_PATH.read_bytes())))


@lru_cache(maxsize=256)
def _run_join_limit(byte: int) -> int:
    """The longest r such that the byte repeated 2..r times is each a table string (1 if none)."""
    table = shared_tokens()
    r = 1
    while bytes([byte]) * (r + 1) in table:
        r += 1
    return r


def run_bound(n: int, r: int) -> int:
    """The most pieces n equal bytes split into when no two neighbours may join into a run of
    2..r of them: neighbours must total more than r, so every two pieces take r + 1 bytes."""
    if r < 2:
        return n
    pairs, left = divmod(n, r + 1)
    return 2 * pairs + (1 if left else 0)


def split_bound(data: bytes, table: frozenset[bytes], join_check: int = JOIN_CHECK) -> int:
    """The most pieces `data` splits into such that no two neighbouring pieces join into a table
    string of at most `join_check` bytes. best[i][k]: the most pieces for data[:i] whose last
    piece is data[k:i], for the last join_check values of k; longer last pieces join nothing
    checked, so they only need the best count up to their start (`upto`)."""
    n = len(data)
    if n == 0:
        return 0
    K = join_check
    short: list[dict[int, int]] = [{} for _ in range(n + 1)]
    long_best = [0] * (n + 1)   # the best with a last piece longer than K (0: none)
    upto = [0] * (n + 1)        # the best over every split of data[:j], for j <= i
    for i in range(1, n + 1):
        ending = short[i]
        for k in range(max(0, i - K), i):
            if k == 0:
                ending[k] = 1
                continue
            best = long_best[k]
            for start, count in short[k].items():
                if count > best and (i - start > K or data[start:i] not in table):
                    best = count
            ending[k] = best + 1 if best else 0
        if i > K:
            long_best[i] = upto[i - K - 1] + 1
        here = max(max(ending.values()), long_best[i])
        upto[i] = max(upto[i - 1], here)
    return max(max(short[n].values()), long_best[n])


@lru_cache(maxsize=65536)
def chunk_bound(chunk: str) -> int:
    data = chunk.encode("utf-8", "surrogatepass")
    table = shared_tokens()
    if len(data) < 2:
        return len(data)
    if data in table:
        return 1
    if data.count(data[0]) == len(data) and data[0] < 0x80:
        return run_bound(len(data), _run_join_limit(data[0]))
    if len(data) > SPLIT_LIMIT:
        return len(data)
    return split_bound(data, table)


def token_bound(text: str) -> int:
    """Tokens `text` costs at most (see the module's note for why)."""
    if not text:
        return 0
    # concurrent: the GIL is let go while a pattern splits the text, so a long text counted in a
    # worker thread does not hold the event loop's thread meanwhile
    return max(sum(map(chunk_bound, pattern.findall(text, concurrent=True))) for pattern in _COMPILED)
