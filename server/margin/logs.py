"""Logging set-up. Margin's logs carry metadata only (ids, sizes, counts, timings, error
classes). Libraries log content: pygls whole messages, aiosqlite every statement with its
parameters, httpx request lines. Their loggers are held at WARNING and their arguments are
withheld."""

from __future__ import annotations

import logging
import os
import re
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


LIBRARIES = ("pygls", "aiosqlite", "httpx", "httpcore")


_PLACEHOLDER = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]")
METADATA_MESSAGES = frozenset({
    'Exception occurred for message "%s"',
    'Cancel notification for unknown message id "%s"',
    'Received response to unknown message id "%s"',
    "Ignoring notification for unknown method %r",
    "Failed to handle request %r, unknown method %r",
    'Cancelled request with id "%s"',
    "Ignoring work done progress cancel for unknown token %s",
})
"""Library log messages whose arguments are metadata only (message ids, method names, tokens):
these are shown whole."""


class _RedactLibraryArguments(logging.Filter):
    """Libraries format content (document text, SQL parameters, settings) into the records
    they log; keep the record, with each argument shown as [withheld] unless the message is
    known to carry metadata only. No placeholder is ever left unfilled."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith(LIBRARIES) and record.args:
            if record.msg in METADATA_MESSAGES:
                return True
            message = str(record.msg)
            record.msg = _PLACEHOLDER.sub(lambda m: "%" if m.group(0) == "%%" else "[withheld]", message)
            record.args = None
        return True


_NOT_A_NAME = re.compile(r"[\s\x00-\x1f\x7f]")
NAME_SHOWN_UP_TO = 500


def name(value: object) -> str:
    """A name the client sent (a document's URI, a settings key, a request id) as a log line
    shows it: the name itself, which is metadata, or only its length where it holds what no name
    holds — whitespace or control characters (a URI percent-encodes them; a line break would
    forge log lines), or more than a name's length of text."""
    text = str(value)
    if len(text) > NAME_SHOWN_UP_TO or _NOT_A_NAME.search(text):
        return f"<{len(text)} characters, not shown>"
    return text


def configure(level: str | None = None, path: str | None = None) -> None:
    level = (level or os.environ.get("MARGIN_LOG_LEVEL") or "INFO").upper()
    path = path or os.environ.get("MARGIN_LOG_FILE") or None
    handler: logging.Handler = (
        logging.FileHandler(path, encoding="utf-8") if path else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter(FORMAT))
    # FORMAT shows none of the caller's file, line and function, nor the thread or process:
    # a record that works them out (the caller's frame above all) cost 55 µs here, against 15
    # without (the logging HOWTO's "Optimization"). A request logs two or three lines.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler.addFilter(_RedactLibraryArguments())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for library in LIBRARIES:
        logging.getLogger(library).setLevel(logging.WARNING)
