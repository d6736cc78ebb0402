"""Logging set-up. Margin's logs carry metadata only (ids, sizes, counts, timings, error
classes). Libraries log content: pygls whole messages, aiosqlite every statement with its
parameters, httpx request lines. Their loggers are held at WARNING and their arguments are
withheld."""

from __future__ import annotations

import logging
import os
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


LIBRARIES = ("pygls", "aiosqlite", "httpx", "httpcore")


class _RedactLibraryArguments(logging.Filter):
    """Libraries format content (document text, SQL parameters, settings) into the records
    they log; keep the record, drop its arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith(LIBRARIES) and record.args:
            record.msg = f"{record.msg} [arguments withheld]"
            record.args = None
        return True


def configure(level: str | None = None, path: str | None = None) -> None:
    level = (level or os.environ.get("MARGIN_LOG_LEVEL") or "INFO").upper()
    path = path or os.environ.get("MARGIN_LOG_FILE") or None
    handler: logging.Handler = (
        logging.FileHandler(path, encoding="utf-8") if path else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(_RedactLibraryArguments())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for library in LIBRARIES:
        logging.getLogger(library).setLevel(logging.WARNING)
