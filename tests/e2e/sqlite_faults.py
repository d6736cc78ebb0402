"""`margin-lsp` with a fault injected into SQLite, for tests: every connection Margin opens first
runs the pragmas in $TEST_SQLITE_PRAGMAS (`;`-separated), e.g. `max_page_count = 16` (the file
is full past 16 pages: writes fail with SQLITE_FULL, as on a full disk) or `query_only = 1`
(writes fail with SQLITE_READONLY, as on a read-only file, which root cannot make with chmod).
Everything else is the real server: `python tests/e2e/sqlite_faults.py [margin-lsp args]`."""

from __future__ import annotations

import os
import sqlite3
import sys

_connect = sqlite3.connect


def _faulty_connect(*args, **kwargs):
    db = _connect(*args, **kwargs)
    for pragma in os.environ.get("TEST_SQLITE_PRAGMAS", "").split(";"):
        if pragma.strip():
            db.execute(f"PRAGMA {pragma}")
    return db


if __name__ == "__main__":
    sqlite3.connect = _faulty_connect
    from margin.lsp.main import main

    sys.exit(main())
