"""Counting throughput against raw tiktoken `encode_ordinary`, tokenizer cold loads, and the token
bound (the heuristic) against every exact tokenizer on Python source.

Targets (SPEC, Performance): exact counting within 1.25x of raw tiktoken for both families;
each tokenizer ready to count in <= 1 s cold (Tekken <= 1.5 s, mistral-common's own loader
measured beside it); the token bound never under the exact counts and at most 1.6x the largest.
`--httpx BUNDLE` also prints the bound's over-estimate on httpx's source (docs/benchmarks.md, "The token bound on httpx")."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import finish, interleaved, verdict

COLD_LOAD = {
    "margin tekken_240911": "from margin.core.tokens.local import tekken_counter as f; f('tekken_240911')",
    "mistral-common Tekkenizer.from_file": (
        "from importlib import resources; from mistral_common.tokens.tokenizers.tekken import Tekkenizer; "
        "Tekkenizer.from_file(str(resources.files('mistral_common.data').joinpath('tekken_240911.json')))"),
    "margin o200k_base": "from margin.core.tokens.local import tiktoken_counter as f; f('o200k_base')",
}
PRELUDE = {
    "margin tekken_240911": "import margin.core.tokens.local",
    "mistral-common Tekkenizer.from_file": "import mistral_common.tokens.tokenizers.tekken",
    "margin o200k_base": "import margin.core.tokens.local",
}


def cold_load_seconds(name: str) -> float:
    """Build time in a fresh process, after imports (the file is in the page cache)."""
    code = (f"{PRELUDE[name]}\nimport time, json\nt = time.perf_counter()\n{COLD_LOAD[name]}\n"
            "print(json.dumps(time.perf_counter() - t))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def source_corpus(limit_bytes: int = 2_000_000) -> list[str]:
    """800-character chunks of the standard library's Python source."""
    chunks: list[str] = []
    size = 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for i in range(0, len(text), 800):
            chunks.append(text[i : i + 800])
            size += 800
        if size >= limit_bytes:
            break
    return chunks


def main() -> int:
    from importlib import resources

    import tiktoken
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    from margin.core.tokens.assets import openai_encoding_args
    from margin.core.tokens.counter import CountCache
    from margin.core.tokens.local import tekken_counter, tiktoken_counter

    chunks = source_corpus()
    megabytes = sum(len(c.encode()) for c in chunks) / 1e6
    o200k = tiktoken_counter("o200k_base")
    tekken = tekken_counter("tekken_240911")
    raw = tiktoken.Encoding(**openai_encoding_args("o200k_base"))  # the same encoding, used bare
    mistral = Tekkenizer.from_file(str(resources.files("mistral_common.data").joinpath("tekken_240911.json")))

    def fresh(counter):
        def run():
            counter.cache = CountCache()  # every text is new: the cache only costs
            for chunk in chunks:
                counter.count(chunk)
        return run

    times = interleaved(
        5,
        raw_tiktoken=lambda: [raw.encode_ordinary(c) for c in chunks],
        margin_tiktoken=fresh(o200k),
        margin_tekken=fresh(tekken),
        mistral_common=lambda: [mistral.encode(c, bos=False, eos=False) for c in chunks],
    )
    print(f"Counting {len(chunks)} chunks of Python source ({megabytes:.1f} MB), median of 5 interleaved rounds")
    for name, seconds in times.items():
        ratio = seconds / times["raw_tiktoken"]
        print(f"  {name:<16} {megabytes / seconds:6.1f} MB/s   {ratio:4.2f}x raw tiktoken time")
    for name in ("margin_tiktoken", "margin_tekken"):
        ratio = times[name] / times["raw_tiktoken"]
        print(f"  target {name} <= 1.25x raw tiktoken: {ratio:.2f}x  {verdict(ratio, 1.25, what=f'{name} against raw tiktoken')}")

    print("Cold load (fresh process, after imports), median of 3 interleaved rounds")
    loads: dict[str, list[float]] = {name: [] for name in COLD_LOAD}
    for _ in range(3):
        for name in COLD_LOAD:
            loads[name].append(cold_load_seconds(name))
    medians = {name: sorted(values)[1] for name, values in loads.items()}
    for name, seconds in medians.items():
        print(f"  {name:<38} {seconds:5.2f} s")
    ours, theirs = medians["margin tekken_240911"], medians["mistral-common Tekkenizer.from_file"]
    print(f"  target Tekken <= 1.5 s: {ours:.2f} s  {verdict(ours, 1.5, kind='time', what='Tekken cold load')}"
          f"  ({theirs / ours:.1f}x faster than mistral-common's loader)")
    print(f"  target o200k_base <= 1 s: {medians['margin o200k_base']:.2f} s  "
          f"{verdict(medians['margin o200k_base'], 1.0, kind='time', what='o200k cold load')}")
    bound_report(chunks)
    if "--httpx" in sys.argv:
        httpx_report(Path(sys.argv[sys.argv.index("--httpx") + 1]))
    return finish()


def exact_encodings() -> dict:
    import tiktoken

    from margin.core.tokens.assets import openai_encoding_args, tekken_encoding_args

    found = {name: tiktoken.Encoding(**openai_encoding_args(name)) for name in ("o200k_base", "cl100k_base")}
    found.update({name: tiktoken.Encoding(**tekken_encoding_args(name)) for name in ("tekken_240911", "tekken_240718")})
    return found


def over_estimates(texts: list[str]) -> tuple[int, dict[str, int]]:
    from margin.core.tokens.bound import token_bound

    ours = sum(token_bound(t) for t in texts)
    return ours, {name: sum(len(enc.encode_ordinary(t)) for t in texts) for name, enc in exact_encodings().items()}


def bound_report(chunks: list[str]) -> None:
    ours, exact = over_estimates(chunks)
    print(f"The token bound on the same chunks: {ours} tokens")
    for name, count in exact.items():
        print(f"  {name:<14} {count:8d}   bound {ours / count:.2f}x")
    low, high = min(ours / c for c in exact.values()), ours / max(exact.values())
    print(f"  target never under an exact count: lowest {low:.2f}x  "
          f"{verdict(low, 1.0, at_least=True, kind='exact', what='bound against exact counts')}")
    print(f"  target <= 1.6x the largest exact count: {high:.2f}x  "
          f"{verdict(high, 1.6, kind='exact', what='bound over-estimate')}")


def httpx_report(bundle: Path) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["git", "clone", "-q", str(bundle), tmp], check=True, capture_output=True)
        texts = [p.read_text(encoding="utf-8") for p in sorted(Path(tmp, "httpx").rglob("*.py"))]
    ours, exact = over_estimates(texts)
    print(f"The token bound on httpx's source ({len(texts)} files): {ours} tokens")
    for name, count in exact.items():
        print(f"  {name:<14} {count:8d}   bound {ours / count:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
