"""services.retrieval over in-memory fakes of the workspace's files, git history and kept index
(tests.fakes.workspace): which files the index takes, how buffers and files changed on disk
reach it without a rescan, a restart taking kept files over by their stamps, git history read
again only when HEAD moves, a folder not to index, and indexing giving way between files."""

from __future__ import annotations

import asyncio
import threading

import pytest

from margin.adapters.disk_index_store import DiskIndexStore
from margin.core.index_store import MemoryIndex
from margin.core.retrieval import Commit
from margin.core.vfs import fingerprint
from margin.services.retrieval import Retrieval, _build, _Pause, _Stopped
from tests.conftest import until
from tests.fakes.fake_provider import FakeProvider, close, fake_app
from tests.fakes.workspace import FakeFolderFiles, FakeGitHistory, FakeIndexStore, FakeWorkspace

WS = "file:///ws"
MAIN = f"{WS}/main.py"
INVOICE = '''"""Invoices."""


def compute_invoice_total(lines, tax_rate):
    """The invoice total: every line's price times quantity, plus tax."""
    subtotal = sum(line.price * line.quantity for line in lines)
    return round(subtotal * (1 + tax_rate), 2)
'''
FILLER = "\n".join(f"def helper_{i}(value):\n    return value + {i}\n" for i in range(40))


def workspace(**files: str | bytes) -> FakeWorkspace:
    every = {"billing/invoice.py": INVOICE, "util/helpers.py": FILLER, "main.py": "print('hello')\n",
             "build/invoice_copy.py": INVOICE.replace("compute_invoice_total", "copy_total"), **files}
    return FakeWorkspace(FakeFolderFiles(every, ignored=["build/invoice_copy.py"]))


@pytest.fixture
async def apps(tmp_path):
    made = []

    def make(ws: FakeWorkspace, **env: str) -> Retrieval:
        app = fake_app(tmp_path, FakeProvider(), (WS,), workspace_access=ws.access, **env)
        made.append(app)
        return Retrieval(app)

    yield make
    for app in made:
        await close(app)


async def snippets(retrieval: Retrieval, message: str, shown=()) -> list[str]:
    """The files of the snippets for `message`, best first."""
    await retrieval.indexed(MAIN)
    return [ref.file_id.split(" lines ")[0] for ref in await retrieval.snippets(message, MAIN, shown)]


async def text(retrieval: Retrieval, message: str) -> str:
    """Every snippet's text for `message`."""
    await retrieval.indexed(MAIN)
    return "".join(ref.file.text for ref in await retrieval.snippets(message, MAIN, []))


async def test_snippets_come_from_the_folders_text_files_never_ignored_or_binary_ones(apps):
    ws = workspace(**{"blob.bin": b"compute_invoice_total tax\0\1\2"})
    retrieval = apps(ws)
    await retrieval.indexed(MAIN)
    [first, *_] = refs = await retrieval.snippets("How is the invoice total computed with tax?", MAIN, [])
    assert first.file_id == "billing/invoice.py lines 1-7"
    assert first.file.uri == f"{WS}/billing/invoice.py#L1-7" and first.file.text == INVOICE
    assert first.file.language_id == "python"
    assert not any(ref.file_id.startswith(("build/", "blob.bin")) for ref in refs)
    assert ws.roots and all(str(root) == "/ws" for root in ws.roots)  # the folder's local path
    assert await snippets(retrieval, "invoice total", shown=[f"{WS}/billing/invoice.py"]) == []  # shown whole
    assert await snippets(retrieval, "   ") == []


async def test_buffers_and_files_changed_on_disk_reach_the_index_without_a_rescan(apps):
    ws = workspace()
    retrieval = apps(ws)
    app = retrieval.app
    assert await snippets(retrieval, "zebrafish quota") == []
    ws.files.write("docs/notes.md", "The zebrafish quota is 12.\n")  # behind the index's back
    helpers = f"{WS}/util/helpers.py"
    app.files.open(helpers, "python", 1, FILLER + "\ndef zebrafish_quota(tank):\n    return tank.size // 3\n")
    found = await text(retrieval, "what does zebrafish_quota return?")
    assert "def zebrafish_quota(tank):" in found  # the buffer, as it is now
    assert "The zebrafish quota is 12." not in found  # no rescan: the untouched file is as indexed

    app.files.close(helpers)  # back to the disk's text, once told
    retrieval.touched(helpers)
    retrieval.touched(f"{WS}/docs/notes.md")
    assert await snippets(retrieval, "what does zebrafish_quota return?") == ["docs/notes.md"]

    ws.files.delete("docs/notes.md")
    ws.files.write("build/zebrafish.py", "zebrafish_quota = 3\n")
    ws.files.ignored.add("build/zebrafish.py")
    retrieval.touched(f"{WS}/docs/notes.md")
    retrieval.touched(f"{WS}/build/zebrafish.py")
    assert await snippets(retrieval, "what does zebrafish_quota return?") == []


async def test_a_snippets_file_is_read_again_only_when_it_changed(apps):
    """The lines snippets are cut from are kept by the file's stamp: the next request that hits
    the file does not read it, and one after the file changed shows its new text, never the old."""
    ws = workspace()
    retrieval = apps(ws)
    assert "compute_invoice_total" in await text(retrieval, "invoice total with tax")
    ws.files.reads.clear()
    assert "compute_invoice_total" in await text(retrieval, "invoice total and tax rate")
    assert ws.files.reads == []

    changed = INVOICE.replace("round(subtotal * (1 + tax_rate), 2)", "subtotal + subtotal * tax_rate")
    ws.files.write("billing/invoice.py", changed)
    retrieval.touched(f"{WS}/billing/invoice.py")
    found = await text(retrieval, "invoice total with tax")
    assert "subtotal + subtotal * tax_rate" in found and "round(subtotal" not in found

    app = retrieval.app  # an open buffer's text, by its fingerprint
    app.files.open(f"{WS}/billing/invoice.py", "python", 1, changed.replace("tax_rate", "vat_rate"))
    found = await text(retrieval, "invoice total with vat_rate")
    assert "vat_rate" in found and "tax_rate" not in found


async def test_a_restart_takes_over_kept_files_whose_stamp_is_unchanged_without_reading_them(apps):
    ws = workspace(**{"a.py": "def alpha_walrus():\n    pass\n", "b.py": "def beta():\n    pass\n"})
    first = apps(ws)
    await first.indexed(MAIN)
    assert ws.store.saves == 1 and set(ws.store.kept) == {"a.py", "b.py", "billing/invoice.py",
                                                          "main.py", "util/helpers.py"}

    ws.files.write("a.py", "def gamma_orcas():\n    pass\n", keep_stamp=True)  # only a kept index still knows the old
    ws.files.write("b.py", "def beta_changed():\n    return 1\n")
    ws.files.reads.clear()
    again = apps(ws)
    await again.indexed(MAIN)
    assert ws.files.reads == ["b.py"]  # the only file read: its stamp changed
    assert ws.store.saves == 2
    assert ws.store.kept["b.py"].fingerprint == fingerprint("def beta_changed():\n    return 1\n")
    assert await snippets(again, "alpha walrus") == ["a.py"]
    assert await snippets(again, "beta changed") == ["b.py"]


async def test_git_history_is_read_once_per_head_and_names_files_their_code_does_not(apps):
    ws = workspace(**{"pay.py": "def settle(amount):\n    return round(amount * 2, 2)\n"})
    ws.git = FakeGitHistory([Commit(1, ("pay.py",), "Fix rounding of walrus refunds")])
    retrieval = apps(ws)
    assert (await snippets(retrieval, "where are walrus refunds rounded?"))[0] == "pay.py"  # by the subject alone
    assert (await snippets(retrieval, "where are walrus refunds rounded?"))[0] == "pay.py"
    assert ws.git.reads == 1  # HEAD did not move

    ws.git.commit("Penguin tariffs for helpers", "util/helpers.py")
    ws.git.gate = asyncio.Event()
    assert "util/helpers.py" not in await snippets(retrieval, "penguin tariffs")  # read in the background
    reading = [task for task in retrieval.app.background if task.get_name() == f"git history {WS}"]
    ws.git.gate.set()
    await asyncio.wait(reading)
    assert ws.git.reads == 2
    assert (await snippets(retrieval, "where are the penguin tariffs?"))[0] == "util/helpers.py"


async def test_a_folder_not_to_index_is_told_once_and_never_scanned(apps):
    ws = workspace()
    ws.files.refused = "it is your home folder"
    retrieval = apps(ws)
    told: list[str] = []
    retrieval.app.tell_user = told.append
    assert await snippets(retrieval, "invoice total") == []
    assert await snippets(retrieval, "invoice total") == []
    assert told == [("Margin does not index /ws for workspace snippets: it is your home folder. Open a project's "
                    "folder instead; chat and edits work as usual, without snippets.")]
    assert ws.files.reads == [] and not retrieval.app.background


async def test_retrieval_turned_off_reads_nothing(apps):
    ws = workspace()
    retrieval = apps(ws, MARGIN_RETRIEVAL="false")
    retrieval.warm([WS])
    assert await snippets(retrieval, "invoice total") == []
    assert ws.roots == [] and ws.files.reads == []


def test_building_and_storing_the_index_wait_between_files_while_other_work_runs():
    """Indexing gives way between files (services.background): the thread stops at the gate
    while it is shut, goes on when it opens, and ends at its next file once cancelled."""
    files, store = FakeFolderFiles({f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(5)}), FakeIndexStore()
    calls: list[str] = []
    index, _ = _build(files, store, lambda: calls.append("file"))
    assert calls == ["file"] * 5  # once before each file
    index.save(lambda: calls.append("stored"))
    assert calls[5:] == ["stored"] * 5
    assert _build(files, store)[1] == 5  # what was kept a file at a time is taken over whole

    may_run, stop = threading.Event(), threading.Event()
    pause = _Pause(may_run, stop)
    built: list[int] = []
    worker = threading.Thread(target=lambda: built.append(len(_build(files, store, pause)[0])))
    worker.start()
    worker.join(0.3)
    assert worker.is_alive() and built == []  # held at the first file
    may_run.set()
    worker.join()
    assert built == [5] and pause.seconds > 0

    may_run.clear()
    stop.set()
    with pytest.raises(_Stopped):
        _build(files, store, pause)


def test_a_buffers_text_is_never_kept_as_the_files_on_disk():
    """The stamp says which text is indexed: a file put from a buffer with other text is not
    kept (the next start reads it from disk), one put with the same text still is."""
    store, files = FakeIndexStore(), FakeFolderFiles({"a.py": "a.py = 1\n", "b.py": "b.py = 1\n"})
    rebuild = store.rebuild()
    for name in ("a.py", "b.py"):
        rebuild.put(name, f"{name} = 1\n", fingerprint(f"{name} = 1\n"), files.stamps[name])
    index = rebuild.finish()
    assert isinstance(index, MemoryIndex)
    index.put("a.py", "a.py = 2\n", fingerprint("a.py = 2\n"))  # unsaved edits
    index.put("b.py", "b.py = 1\n", fingerprint("b.py = 1\n"))  # a buffer as the disk has it
    index.save(lambda: None)
    assert set(store.kept) == {"b.py"}


class HeldFolderFiles(FakeFolderFiles):
    """A folder whose scan stops before its `held_at`-th file until `go` is set (a large
    workspace, part of the way through its first build)."""

    def __init__(self, files: dict[str, str], held_at: int) -> None:
        super().__init__(files)
        self.held_at, self.held, self.go = held_at, threading.Event(), threading.Event()

    def scan(self):
        for n, found in enumerate(super().scan()):
            if n == self.held_at:
                self.held.set()
                self.go.wait()
            yield found


async def test_a_cold_start_answers_from_what_the_index_on_disk_holds_so_far(apps, tmp_path):
    """The index kept on disk (adapters.disk_index_store, a real SQLite file) is searched while
    the first build runs: the files of the latest commits are indexed first and answer at once,
    the rest once the scan reaches them; progress tells how far it is."""
    files = {f"pkg/m{i:03}.py": f"def helper_{i}(value):\n    return value + {i}\n" for i in range(40)}
    files["pkg/m039.py"] = "def compute_walrus_tariff(order):\n    return order.total * 0.2\n"  # scanned last
    files["pkg/m001.py"] = "def settle_penguin_refund(order):\n    return order.fee\n"  # after the hold, too
    ws = FakeWorkspace(HeldFolderFiles(files, held_at=0))
    ws.git = FakeGitHistory([Commit(1, ("pkg/m039.py",), "Tariffs for walruses")])
    ws.store = DiskIndexStore(WS, tmp_path / "index")
    retrieval = apps(ws)
    retrieval.warm([WS])
    await until(lambda: ws.files.held.is_set())
    (progress,) = retrieval.progress().values()
    assert not progress.ready and progress.scanned == 1 and progress.expected == 0
    found = await retrieval.snippets("how is the walrus tariff computed?", MAIN, [])
    assert [ref.file_id.split(" lines ")[0] for ref in found] == ["pkg/m039.py"]  # the latest commit's file, at once
    assert await retrieval.snippets("where is the penguin refund settled?", MAIN, []) == []  # not scanned yet

    ws.files.go.set()
    await retrieval.indexed(MAIN)
    assert progress.ready and progress.scanned == 40
    assert (await snippets(retrieval, "where is the penguin refund settled?"))[0] == "pkg/m001.py"

    again = apps(ws)  # a warm start: every file taken over by its stamp, none read
    ws.files.reads.clear()
    ws.files.held_at = -1
    await again.indexed(MAIN)
    (progress,) = again.progress().values()
    assert ws.files.reads == [] and progress.expected == progress.reused == 40


async def test_in_a_large_folder_a_requests_indexing_and_search_run_off_the_event_loop(apps, monkeypatch):
    """Past INLINE_FILES files, a request's indexing (here: a file changed on disk, read again)
    and search run in a worker thread; the snippets are the same."""
    import margin.services.retrieval as retrieval_module

    class Watched(FakeFolderFiles):
        def read(self, file_id: str, limit: int) -> bytes | None:
            self.threads.append(threading.get_ident())
            return super().read(file_id, limit)

    files = Watched({"billing/invoice.py": INVOICE, "util/helpers.py": FILLER})
    files.threads = []
    retrieval = apps(FakeWorkspace(files))
    assert await snippets(retrieval, "invoice total with tax") == ["billing/invoice.py"]
    monkeypatch.setattr(retrieval_module, "INLINE_FILES", 1)
    files.write("util/helpers.py", FILLER + "\ndef walrus_tariff(order):\n    return order.total\n")
    retrieval.touched(f"{WS}/util/helpers.py")
    files.threads.clear()
    found = await text(retrieval, "how is the walrus tariff computed?")
    assert "def walrus_tariff(order):" in found
    assert files.threads and threading.get_ident() not in files.threads[:1]  # read again in a worker thread
