"""Workspace snippets ("fact memories") through the real margin-lsp process: the index built in
the background from what git would not ignore, kept current from the editor's buffers without a
rescan, snippets sent as data like files and never resent while unchanged and retained."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
from pathlib import Path

from lsprotocol import types

from tests.conftest import until
from tests.e2e.lsp_client import change_doc, margin_client, open_doc, request
from tests.fakes.fake_openai import reply

INVOICE = '''"""Invoices."""


def compute_invoice_total(lines, tax_rate):
    """The invoice total: every line's price times quantity, plus tax."""
    subtotal = sum(line.price * line.quantity for line in lines)
    return round(subtotal * (1 + tax_rate), 2)
'''
FILLER = "\n".join(f"def helper_{i}(value):\n    return value + {i}\n" for i in range(40))


def env(fake, tmp_path, **extra):
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "db" / "threads.db"),
            "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", **extra}


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    files = {"billing/invoice.py": INVOICE, "util/helpers.py": FILLER, "main.py": "print('hello')\n",
             ".gitignore": "build/\n", "build/invoice_copy.py": INVOICE.replace("compute_invoice_total", "copy_total"),
             "docs/notes.md": "Release notes.\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


async def explain(client, root: Path, message: str, **params) -> dict:
    return await request(client, "margin/explain", {"message": message,
                                                    "textDocument": {"uri": (root / "main.py").as_uri()}, **params})


def snippets_of(result: dict) -> dict:
    return next(s for s in result["budget"]["sections"] if s["name"] == "snippets")


def contents(messages: list[dict]) -> str:
    return "\n".join(m["content"] for m in messages)


def changed(client, path: Path, kind: types.FileChangeType = types.FileChangeType.Changed) -> None:
    """What the editor's file watcher reports."""
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams([types.FileEvent(path.as_uri(), kind)]))


async def ready(client, root: Path) -> None:
    """Until the background index is built (the status lists no index work)."""
    while any(name.startswith("index ") for name in (await request(client, "margin/status", {}))["background"]):
        await asyncio.sleep(0.05)


async def test_a_relevant_snippet_is_sent_and_ignored_files_never_are(fake, tmp_path):
    root = workspace(tmp_path)
    async with margin_client(env=env(fake, tmp_path), root=root) as client:
        await ready(client, root)
        result = await explain(client, root, "How is the invoice total computed with tax?")
        text = contents(result["messages"])
        assert "File billing/invoice.py lines 1-7 (python, sha256:" in text
        assert "def compute_invoice_total(lines, tax_rate):" in text
        assert "copy_total" not in text  # build/ is ignored by .gitignore
        section = snippets_of(result)
        assert section["kept"] >= 1 and section["tokens"] > 0
        system = result["messages"][0]["content"]
        assert "compute_invoice_total" not in system  # data, not instructions

        off = await request(client, "margin/explain", {"message": "How is the invoice total computed?"})
        assert "compute_invoice_total" in contents(off["messages"])  # no document: the first folder


async def test_retrieval_can_be_turned_off(fake, tmp_path):
    root = workspace(tmp_path)
    async with margin_client(env=env(fake, tmp_path, MARGIN_RETRIEVAL="false"), root=root) as client:
        result = await explain(client, root, "How is the invoice total computed with tax?")
        assert "compute_invoice_total" not in contents(result["messages"])
        assert snippets_of(result)["kept"] == 0


async def test_edits_in_the_editor_reach_the_index_without_a_rescan(fake, tmp_path):
    root = workspace(tmp_path)
    uri = (root / "util/helpers.py").as_uri()
    async with margin_client(env=env(fake, tmp_path), root=root) as client:
        await ready(client, root)
        (root / "docs/notes.md").write_text("The zebrafish quota is 12.\n")  # on disk, behind the index's back
        open_doc(client, uri, FILLER)
        change_doc(client, uri, 2, (None, FILLER + "\ndef zebrafish_quota(tank):\n    return tank.size // 3\n"))
        result = await explain(client, root, "what does zebrafish_quota return?", files=[])
        text = contents(result["messages"])
        assert "def zebrafish_quota(tank):" in text  # the buffer, as it is now
        assert "The zebrafish quota is 12." not in text  # no rescan: the untouched file is as indexed

        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))  # back to disk
        result = await explain(client, root, "what does zebrafish_quota return?", files=[])
        assert "def zebrafish_quota" not in contents(result["messages"])


async def test_a_snippet_is_not_resent_while_unchanged_and_retained(fake, tmp_path):
    root = workspace(tmp_path)
    async with margin_client(env=env(fake, tmp_path), root=root) as client:
        await ready(client, root)
        fake.script(reply("It sums the lines."), reply("Yes, rounded to cents."))
        ask = {"message": "How is the invoice total computed with tax?", "textDocument": {"uri": (root / "main.py").as_uri()}}
        first = await request(client, "margin/chat", ask)
        assert snippets_of(first)["kept"] >= 1
        second = await request(client, "margin/chat", {**ask, "message": "Is the invoice total rounded?"})
        sent = contents(fake.requests[-1]["messages"])
        assert sent.count("def compute_invoice_total(lines, tax_rate):") == 1  # retained in the history, once
        assert snippets_of(second)["kept"] == 0

        (root / "billing/invoice.py").write_text(INVOICE.replace("round(", "roundup("))  # a git checkout, say
        changed(client, root / "billing/invoice.py")
        fake.script(reply("Now it rounds up."))
        third = await request(client, "margin/chat", {**ask, "message": "Is the invoice total rounded now?"})
        sent = contents(fake.requests[-1]["messages"])
        assert "roundup(" in sent and snippets_of(third)["kept"] >= 1  # changed: sent again


async def test_files_created_changed_and_deleted_on_disk_follow_the_watcher_and_gitignore(fake, tmp_path):
    root = workspace(tmp_path)
    async with margin_client(env=env(fake, tmp_path), root=root) as client:
        await ready(client, root)
        (root / "billing/refunds.py").write_text("def refund_walrus_fee(order):\n    return order.fee\n")
        (root / "build/walrus.py").write_text("def walrus_fee_copy():\n    pass\n")
        changed(client, root / "billing/refunds.py", types.FileChangeType.Created)
        changed(client, root / "build/walrus.py", types.FileChangeType.Created)
        text = contents((await explain(client, root, "where is the walrus fee refunded?"))["messages"])
        assert "def refund_walrus_fee(order):" in text and "walrus_fee_copy" not in text
        (root / "billing/refunds.py").unlink()
        changed(client, root / "billing/refunds.py", types.FileChangeType.Deleted)
        text = contents((await explain(client, root, "where is the walrus fee refunded?"))["messages"])
        assert "refund_walrus_fee" not in text


async def test_a_restart_reuses_the_stored_index(fake, tmp_path):
    root = workspace(tmp_path)
    async with margin_client(env=env(fake, tmp_path), root=root) as client:
        await ready(client, root)
    stored = list((tmp_path / "db" / "index").glob("*.db"))
    assert len(stored) == 1
    (root / "billing/invoice.py").write_text(INVOICE + "\n\ndef invoice_penguin_discount():\n    return 0\n")
    async with margin_client(env=env(fake, tmp_path), root=root) as client:
        await ready(client, root)
        text = contents((await explain(client, root, "how is the invoice penguin discount computed?"))["messages"])
        assert "def invoice_penguin_discount():" in text  # changed while Margin was not running: read again


async def test_two_servers_of_one_folder_share_its_index_on_disk(fake, tmp_path):
    """Two editors on one folder: one index file, built by both at once without harm; a file
    changed on disk and reported to one server is found by the other; an unsaved buffer stays
    with its own server."""
    root = workspace(tmp_path)
    helpers = root / "util/helpers.py"
    async with margin_client(env=env(fake, tmp_path), root=root) as one, \
            margin_client(env=env(fake, tmp_path), root=root) as two:
        await asyncio.gather(ready(one, root), ready(two, root))
        for client in (one, two):
            (status,) = (await request(client, "margin/status", {}))["indexes"]
            assert status["ready"] and status["filesScanned"] == 5  # .gitignore, invoice, helpers, main, notes
            text = contents((await explain(client, root, "How is the invoice total computed with tax?"))["messages"])
            assert "def compute_invoice_total(lines, tax_rate):" in text

        (root / "billing/refunds.py").write_text("def refund_walrus_fee(order):\n    return order.fee\n")
        changed(one, root / "billing/refunds.py", types.FileChangeType.Created)
        assert "def refund_walrus_fee(order):" in contents((await explain(one, root, "where is the walrus fee refunded?"))["messages"])
        assert "def refund_walrus_fee(order):" in contents((await explain(two, root, "where is the walrus fee refunded?"))["messages"])

        open_doc(one, helpers.as_uri(), FILLER + "\ndef penguin_quota(tank):\n    return tank.size // 3\n")
        assert "def penguin_quota(tank):" in contents((await explain(one, root, "what is the penguin quota?"))["messages"])
        assert "penguin_quota" not in contents((await explain(two, root, "what is the penguin quota?"))["messages"])
    (stored,) = (tmp_path / "db" / "index").glob("*.db")
    with sqlite3.connect(stored) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert sorted(r[0] for r in db.execute("SELECT file_id FROM files")) == [
            ".gitignore", "billing/invoice.py", "billing/refunds.py", "docs/notes.md", "main.py", "util/helpers.py"]


def git(root: Path, *args: str) -> None:
    import subprocess
    subprocess.run(["git", "-C", str(root), "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True)


def repository(tmp_path: Path) -> Path:
    """The workspace as a git repository of one commit, with pay.py changed since (not committed)."""
    root = workspace(tmp_path)
    (root / "pay.py").write_text("def settle(amount):\n    return amount * 2\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "Initial import")
    (root / "pay.py").write_text("def settle(amount):\n    return round(amount * 2, 2)\n")
    return root


async def test_git_history_names_files_their_code_does_not(fake, tmp_path):
    root = repository(tmp_path)
    git(root, "commit", "-qam", "Fix rounding of walrus refunds")
    async with margin_client(env=env(fake, tmp_path), root=root) as client:
        await ready(client, root)
        text = contents((await explain(client, root, "where are walrus refunds rounded?"))["messages"])
        assert "File pay.py lines 1-2 (python, sha256:" in text  # found by the commit's subject alone

        (root / "util/helpers.py").write_text(FILLER + "\n")
        git(root, "commit", "-qam", "Penguin tariffs for helpers")  # HEAD moves: read again, in the background
        changed(client, root / "util/helpers.py")
        await explain(client, root, "penguin tariffs")
        await ready(client, root)
        while any(n.startswith("git history") for n in (await request(client, "margin/status", {}))["background"]):
            await asyncio.sleep(0.05)
        text = contents((await explain(client, root, "where are the penguin tariffs?"))["messages"])
        assert "File util/helpers.py lines " in text


async def test_the_file_system_root_is_not_indexed_and_the_user_is_told(fake, tmp_path):
    async with margin_client(env=env(fake, tmp_path), root=Path("/")) as client:
        await until(lambda: any("does not index" in m.message for m in client.messages))
        status = await request(client, "margin/status", {})
        explained = await request(client, "margin/explain", {"message": "where is the invoice total computed?",
                                                             "textDocument": {"uri": "file:///main.py"}})
    (message,) = [m.message for m in client.messages if "does not index" in m.message]
    assert message == ("Margin does not index / for workspace snippets: it is the file system's root. Open a "
                       "project's folder instead; chat and edits work as usual, without snippets.")
    assert not any(name.startswith("index ") for name in status["background"])
    assert snippets_of(explained)["kept"] == 0


async def test_a_repository_config_cannot_make_git_run_a_program(fake, tmp_path):
    """`.git/config` comes with a repository shared as an archive or a folder: `log.showSignature`
    with `gpg.program` made `git log` run a program of its choosing, `core.fsmonitor` any command
    that reads the index. Margin's history still reads, and nothing runs."""
    root = repository(tmp_path)
    # A signed commit of pay.py's change (the signature need not be valid for git to ask the
    # program to check it).
    git(root, "add", "pay.py")
    tree = subprocess.run(["git", "-C", str(root), "write-tree"], capture_output=True, text=True).stdout.strip()
    parent = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    commit = (f"tree {tree}\nparent {parent}\nauthor T <t@example.com> 1700000000 +0000\n"
              "committer T <t@example.com> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEz\n"
              " -----END PGP SIGNATURE-----\n\nFix rounding of walrus refunds\n")
    signed = subprocess.run(["git", "-C", str(root), "hash-object", "-t", "commit", "-w", "--stdin"], input=commit,
                            capture_output=True, text=True, check=True).stdout.strip()
    git(root, "update-ref", "HEAD", signed)
    ran = tmp_path / "ran"
    program = tmp_path / "program.sh"
    program.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {ran}\ncat >/dev/null\nexit 1\n")
    program.chmod(0o755)
    git(root, "config", "log.showSignature", "true")
    git(root, "config", "gpg.program", str(program))
    git(root, "config", "core.fsmonitor", str(program))
    subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%s"], capture_output=True)
    assert ran.exists(), "the attack does not work on this git: the test would prove nothing"
    ran.unlink()
    async with margin_client(env=env(fake, tmp_path), root=root) as client:
        await ready(client, root)
        text = contents((await explain(client, root, "where are walrus refunds rounded?"))["messages"])
    assert "File pay.py lines 1-2 (python, sha256:" in text  # the history was read (the signed commit's subject)
    assert not ran.exists()
