"""Logging set-up. Margin's logs carry metadata only (ids, sizes, counts, timings, error
classes); pygls logs whole messages at INFO and below, so its loggers are held at WARNING."""

from __future__ import annotations

import logging
import os
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _RedactLibraryArguments(logging.Filter):
    """pygls formats whole messages (document text, settings) into the few records it logs at
    WARNING and above; keep the record, drop its arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("pygls") and record.args:
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
    for noisy in ("pygls", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
