"""The mutation probe: deliberate one-line bugs in the modules that keep Margin's promises (no
corrupted file, no context overflow, no secret sent where it must not go), each run against the
tests of the rule it breaks. Every mutant must be killed (a test fails); one that survives is a
rule no test holds.

    .venv/bin/python scripts/mutation_probe.py            # every mutant (~5 minutes)
    .venv/bin/python scripts/mutation_probe.py -k key     # those whose name holds "key"

Each mutant is applied to the working tree and undone right after its tests, whatever happens
(the files it touches must have no uncommitted change, so nothing of yours is at stake). Prints
one line per mutant and a score; exits 1 when any survives.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SERVER = "server/margin/"


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    """under server/margin/"""
    changes: tuple[tuple[str, str], ...]
    """(text that occurs exactly once, what replaces it)"""
    tests: tuple[str, ...]
    """the tests of the rule it breaks (pytest node ids or paths)"""


MUTANTS = (
    # --- a secret goes only where the user sent it (docs/security.md) ---
    Mutant("key sent to a base URL set elsewhere", "core/api_keys.py",
           (("    if origin(route.own_base_url) != target:", "    if False:"),),
           ("tests/unit/core/test_api_keys.py", "tests/e2e/test_security.py")),
    Mutant("key sent over plain HTTP off loopback", "core/api_keys.py",
           (('    if target[0] == "http" and not is_loopback(target[1]):', "    if False:"),),
           ("tests/unit/core/test_api_keys.py",)),
    Mutant("workspace settings say where prompts go", "core/settings.py",
           (("        if source.workspace:", "        if False:"),),
           ("tests/unit/core/test_settings.py", "tests/e2e/test_security.py")),
    Mutant("the key sent whatever the decision", "services/backends.py",
           (("if self.api_key(profile).send and profile.api_key_env", "if profile.api_key_env"),),
           ("tests/unit/services/test_backends.py", "tests/e2e/test_security.py")),
    Mutant("an ambient OPENAI_API_KEY sent with no apiKeyEnv", "services/backends.py",
           (("self.api_key(profile).send and profile.api_key_env else None",
             'self.api_key(profile).send and profile.api_key_env else self._environ.get("OPENAI_API_KEY")'),),
           ("tests/unit/services/test_backends.py",)),
    Mutant("git runs a repository's programs", "adapters/git_cli.py",
           (('GIT_NO_PROGRAMS = ("-c", "log.showSignature=false", "-c", "core.fsmonitor=false")',
             "GIT_NO_PROGRAMS = ()"),),
           ("tests/e2e/test_lsp_retrieval.py::test_a_repository_config_cannot_make_git_run_a_program",)),
    Mutant("any TCP token accepted", "lsp/tcp.py",
           (("hmac.compare_digest(presented.encode(), token.encode())", "True"),),
           ("tests/e2e/test_tcp.py",)),
    Mutant("TCP off loopback without --allow-remote", "lsp/main.py",
           (("        if not _loopback(host) and not args.allow_remote:", "        if False:"),),
           ("tests/e2e/test_tcp.py",)),
    # --- no context overflow: the token bound never under-counts ---
    Mutant("the bound trusts a join the table forbids", "core/tokens/bound.py",
           (("if count > best and (i - start > K or data[start:i] not in table):", "if count > best:"),),
           ("tests/unit/core/tokens/test_bound.py",)),
    Mutant("the bound takes one pre-tokenizer, not the largest", "core/tokens/bound.py",
           (("    return max(sum(map(chunk_bound, pattern.findall(text))) for pattern in _COMPILED)",
             "    return sum(map(chunk_bound, _COMPILED[0].findall(text)))"),),
           ("tests/unit/core/tokens/test_bound.py",)),
    Mutant("a run of one byte splits finer than the table allows", "core/tokens/bound.py",
           (("    return 2 * pairs + (1 if left else 0)", "    return 2 * pairs + (1 if left else 0) - (n > r + 1)"),),
           ("tests/unit/core/tokens/test_bound.py",)),
    # --- edits land only on the text the model saw ---
    Mutant("an open file of another text taken as the base", "services/editops.py",
           (("            if base is None and current is not None and current.fingerprint == fingerprint:",
             "            if base is None and current is not None:"),),
           ("tests/unit/services/test_editops.py", "tests/unit/services/test_apply_property.py")),
    # The bug the property test met by chance: bases by fingerprint alone, each checked to be of
    # its file. (Bases by fingerprint alone and no check is no bug: the same fingerprint is the
    # same text.)
    Mutant("one file's base stands for another's with the same text", "services/editops.py",
           (("        key = (file.uri, file.fingerprint)", '        key = ("", file.fingerprint)'),
            ("        return self._texts.get((uri, fingerprint))", '        return self._texts.get(("", fingerprint))'),
            ("            if base is None:\n", "            if base is None or base.uri != uri:\n")),
           ("tests/unit/services/test_editops.py",)),
    Mutant("a stale file applied anyway", "core/editops.py",
           (("            if shifted is None:\n                stale.append(uri)\n                continue",
             "            if shifted is None:\n                shifted = list(file_edits)"),),
           ("tests/unit/services/test_editops.py", "tests/unit/services/test_apply_property.py")),
    Mutant("a fingerprint over other bytes", "core/vfs.py",
           (('    data = text.encode("utf-8", "surrogatepass")', '    data = text.encode("utf-16", "surrogatepass")'),),
           ("tests/unit/services/test_editops.py", "tests/unit/core/test_vfs.py")),
    # --- old content shown as pointers, recalled exactly ---
    Mutant("the latest reply masked", "core/pointers.py",
           (("            older = message.id != last_reply  # the latest reply is never masked",
             "            older = True"),),
           ("tests/unit/core/test_pointers.py",)),
    Mutant("an ops pointer recalls the reply's text", "core/pointers.py",
           (("return Recalled(part.pointer, message, part.text,", "return Recalled(part.pointer, message, message.content,"),),
           ("tests/unit/core/test_pointers.py",)),
    Mutant("the recall tool adds a character", "core/recall_tool.py",
           (('f"{head}.\\n\\n{found.content}"', 'f"{head}.\\n\\n{found.content}."'),),
           ("tests/e2e/test_lsp_recall_tool.py",)),
    # --- retrieval ranks by every signal ---
    Mutant("priority weighs nothing", "core/retrieval/rank.py",
           (("    priority: float = 0.2\n", "    priority: float = 0.0\n"),),
           ("tests/unit/core/retrieval/test_index.py",)),
    Mutant("recency weighs nothing", "core/retrieval/rank.py",
           (("    recency: float = 0.2\n", "    recency: float = 0.0\n"),),
           ("tests/unit/core/retrieval/test_index.py",)),
    # --- inline completion shows code, never markup ---
    Mutant("a fence after the typed text is shown", "core/completion/postprocess.py",
           (('    if lines[0].lstrip().startswith("```"):', "    if False:"),),
           ("tests/unit/core/completion/test_postprocess.py",)),
)


def run(mutant: Mutant) -> tuple[bool, float, str]:
    """(killed, seconds, the first failing test's line or why it survived)."""
    path = REPO / SERVER / mutant.file
    original = path.read_text(encoding="utf-8")
    mutated = original
    for find, replace in mutant.changes:
        if mutated.count(find) != 1:
            raise SystemExit(f"{mutant.name}: {find!r} occurs {mutated.count(find)} times in {path}: update the probe")
        mutated = mutated.replace(find, replace)
    started = time.perf_counter()
    try:
        path.write_text(mutated, encoding="utf-8")
        result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                 *mutant.tests], cwd=REPO, capture_output=True, text=True, timeout=1200)
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = time.perf_counter() - started
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED ")]
    return result.returncode == 1 and bool(failed), seconds, (failed[0][7:] if failed else result.stdout[-300:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the mutants whose name holds this")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if args.k in m.name]
    dirty = subprocess.run(["git", "status", "--porcelain", "--", *(SERVER + m.file for m in chosen)],
                           cwd=REPO, capture_output=True, text=True).stdout.strip()
    if dirty:
        print(f"commit or stash these first (the probe rewrites them):\n{dirty}", file=sys.stderr)
        return 2
    survived = []
    for mutant in chosen:
        killed, seconds, detail = run(mutant)
        print(f"{'killed ' if killed else 'SURVIVED'}  {mutant.name:<58} {seconds:5.1f} s  {detail.split(' - ')[0]}",
              flush=True)
        if not killed:
            survived.append(mutant.name)
    print(f"{len(chosen) - len(survived)} of {len(chosen)} mutants killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
