"""Writes server/margin/core/tokens/shared_tokens.json.gz: the strings that are one token in
every vocabulary this machine has — OpenAI's o200k_base and cl100k_base (the bpe-openai wheel),
Mistral's two Tekken files (mistral-common) and Gemma 3's (the GGUF that
scripts/install-model-server.sh installs). The token bound (core/tokens/bound.py) relies on
these strings being tokens; a string common to five vocabularies of three vendors is one in any
large modern vocabulary. Every string in the table is a token of o200k_base (MIT).

    .venv/bin/python scripts/build_shared_tokens.py [--check]

--check rebuilds in memory and exits 1 when the shipped table differs.
"""

from __future__ import annotations

import gzip
import json
import struct
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "server"))

from margin.core.tokens.assets import openai_encoding_args, tekken_encoding_args
from margin.core.tokens.bound import TABLE_PATH

GGUF_STRING, GGUF_ARRAY = 8, 9
GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_tokens(path: Path) -> list[str]:
    """`tokenizer.ggml.tokens` of a GGUF file (its header only is read)."""
    with path.open("rb") as f:
        def u32() -> int:
            return struct.unpack("<I", f.read(4))[0]

        def u64() -> int:
            return struct.unpack("<Q", f.read(8))[0]

        def string() -> str:
            return f.read(u64()).decode("utf-8", "replace")

        if f.read(4) != b"GGUF":
            raise SystemExit(f"{path} is not a GGUF file")
        u32()  # version
        u64()  # tensors
        for _ in range(u64()):
            key, kind = string(), u32()
            if kind == GGUF_STRING:
                string()
            elif kind == GGUF_ARRAY:
                inner, count = u32(), u64()
                if inner == GGUF_STRING:
                    values = [string() for _ in range(count)]
                    if key == "tokenizer.ggml.tokens":
                        return values
                else:
                    f.seek(GGUF_SIZES[inner] * count, 1)
            else:
                f.read(GGUF_SIZES[kind])
    raise SystemExit(f"{path} has no tokenizer.ggml.tokens")


def gemma_vocabulary() -> set[bytes]:
    found = subprocess.run(["bash", str(REPO / "scripts" / "install-model-server.sh"), "--check"],
                           capture_output=True, text=True)
    if found.returncode != 0:
        raise SystemExit("Gemma's GGUF is needed: run scripts/install-model-server.sh first")
    gguf = Path(found.stdout.strip().splitlines()[-1]) / "gemma-3-270m-q4_k_m.gguf"
    # SentencePiece writes a space as U+2581.
    return {token.replace("\u2581", " ").encode("utf-8") for token in gguf_tokens(gguf)}


def build() -> list[str]:
    vocabularies = [set(openai_encoding_args(name)["mergeable_ranks"]) for name in ("o200k_base", "cl100k_base")]
    vocabularies += [set(tekken_encoding_args(name)["mergeable_ranks"]) for name in ("tekken_240911", "tekken_240718")]
    vocabularies.append(gemma_vocabulary())
    shared = set.intersection(*vocabularies)
    return sorted(token.decode("utf-8") for token in shared if len(token) >= 2)


def main() -> int:
    table = build()
    data = json.dumps(table, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if "--check" in sys.argv:
        shipped = json.loads(gzip.decompress(TABLE_PATH.read_bytes()))
        if shipped != table:
            print(f"{TABLE_PATH} differs from a rebuild ({len(shipped)} against {len(table)} strings)")
            return 1
        print(f"{TABLE_PATH.name}: {len(table)} strings, as rebuilt")
        return 0
    TABLE_PATH.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"wrote {TABLE_PATH} ({len(table)} strings, {TABLE_PATH.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
