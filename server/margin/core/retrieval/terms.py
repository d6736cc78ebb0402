"""Identifier-aware terms for retrieval: words and identifiers split into lowercase parts.

`split_identifier("HTTPTransport_v2")` → `["http", "transport", "v", "2"]`: underscores,
camelCase and acronym boundaries and digit runs all split; every part is lowercased and lightly
stemmed (`stem`: a plural or `-ing`/`-ed` ending folded, so "redirects" meets "redirect" and
"streaming" meets "stream"). `text_terms` applies this to every identifier-like word of a text
and drops stopwords (common English and Python keywords: they occur everywhere and carry no
topic). `path_terms("httpx/_transports/default.py")` gives the directory names and the stem
split the same way (`httpx`, `transport`, `default`); the extension is left out.
"""

from __future__ import annotations

import re
from functools import lru_cache

WORD = re.compile(r"[A-Za-z0-9_]+")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

STOPWORDS = frozenset(["a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do", "does", "doing", "done", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "just", "may", "me", "more", "most", "my", "no", "not", "of", "on", "or", "our", "should", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "was", "we", "were", "what", "when", "where", "which", "while", "who", "why", "will", "with", "would", "you", "your", "also", "only", "any", "each", "other", "same", "very", "all", "both", "def", "class", "return", "import", "none", "true", "false", "self", "cls", "pass", "elif", "else", "try", "except", "finally", "raise", "while", "yield", "lambda", "async", "await", "global", "nonlocal", "del", "assert", "with", "as", "is", "not", "or", "and", "in", "for"])


_WORD_CACHE = 1 << 14
"""Words whose terms are cached (least recently used dropped). On the generated 10,000-file
workspace of benchmarks/bench_retrieval.py this answers 75% of the lookups; 2**17 answered 80%,
held ~80 MB and tokenised no faster."""


def stem(word: str) -> str:
    """Fold the commonest English endings: enough that a query's "redirects" or "streaming" meets
    the code's `redirect` and `stream`. Applied the same way to queries and documents."""
    n = len(word)
    if n > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if n > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    if n > 5 and word.endswith("ing"):
        return word[:-3]
    if n > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    return word


def split_identifier(word: str) -> tuple[str, ...]:
    """The lowercase, stemmed parts of one identifier (no stopword filtering)."""
    parts: list[str] = []
    for chunk in word.split("_"):
        if chunk:
            parts += _chunk_terms(chunk)[0]
    return tuple(parts)


@lru_cache(maxsize=_WORD_CACHE)
def _chunk_terms(chunk: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The parts of an identifier's piece between underscores, and those of them kept as terms
    (no stopword, more than one character). Pieces repeat far more than whole identifiers do."""
    if (chunk.islower() or chunk.isdigit()) and (chunk.isalpha() or chunk.isdigit()):
        parts: tuple[str, ...] = (stem(chunk),)
    else:
        parts = tuple(stem(p.lower()) for p in _PARTS.findall(chunk))
    return parts, tuple(p for p in parts if p not in STOPWORDS and len(p) > 1)


@lru_cache(maxsize=_WORD_CACHE)
def _word_terms(word: str) -> tuple[str, ...]:
    """The terms of one word: its kept parts, then all its parts joined when it has several."""
    if "_" not in word:
        parts, kept = _chunk_terms(word)
        return kept + ("".join(parts),) if len(parts) > 1 else kept
    every: list[str] = []
    terms: list[str] = []
    for chunk in word.split("_"):
        if chunk:
            parts, kept = _chunk_terms(chunk)
            every += parts
            terms += kept
    if len(every) > 1:
        terms.append("".join(every))
    return tuple(terms)


def text_terms(text: str) -> list[str]:
    """Every term of `text`, in order, stopwords and one-character parts dropped."""
    out: list[str] = []
    for word in WORD.findall(text):
        out.extend(_word_terms(word))
    return out


def line_terms(lines: list[str]) -> list[list[str]]:
    """`text_terms` of each line."""
    return [text_terms(line) if line.strip() else [] for line in lines]


def path_terms(file_id: str) -> list[str]:
    """Terms of a workspace-relative path: each directory and the file's stem, split like
    identifiers; the extension is dropped."""
    parts = file_id.replace("\\", "/").split("/")
    stem_part = parts[-1].rsplit(".", 1)[0] if "." in parts[-1] else parts[-1]
    out: list[str] = []
    for part in parts[:-1] + [stem_part]:
        out.extend(_word_terms(part))
    return out
