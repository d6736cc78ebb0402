"""What every `margin` terminal command runs with: the app configured from the command line
(the user settings file, then environment variables), closed when the command is done; the use cases
with the current folder as the workspace; and `CliError`, a problem the user can fix."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from margin.core.languages import language_of
from margin.services.app import MarginApp
from margin.services.registry import Services


class CliError(Exception):
    """A problem the user can fix; printed without a traceback."""


def load_app(settings_path: str | None) -> tuple[MarginApp, str]:
    from margin.wiring import build_app

    app = build_app()
    app.settings_path = settings_path
    app.show_text = lambda text: print(text, file=sys.stderr, flush=True)
    state = app.settings
    if state.startup_problems:
        raise CliError("invalid settings: " + "; ".join(map(str, state.startup_problems)))
    if state.file is None:
        return app, "built-in defaults and environment variables"
    return app, f"{state.file.name.removeprefix('settings file ')}, overlaid by environment variables"


@contextlib.asynccontextmanager
async def running_app(args: argparse.Namespace) -> AsyncIterator[tuple[MarginApp, str]]:
    """The app configured from the command line, closed when the command is done."""
    app, settings_from = load_app(args.settings)
    try:
        yield app, settings_from
    finally:
        await app.aclose()


def open_services(app: MarginApp, files: Sequence[str]) -> tuple[Services, list[str]]:
    """The use cases with the current folder as the workspace and `files` open."""
    uris = []
    for name in files:
        path = Path(name).resolve()
        try:
            text = path.read_bytes().decode("utf-8")  # exact bytes: no newline translation
        except (OSError, UnicodeDecodeError) as error:
            raise CliError(f"cannot read {name}: {error}") from None
        app.files.open(path.as_uri(), language_of(path.name, "plaintext"), 1, text)
        uris.append(path.as_uri())
    app.tell_user = lambda message: print(f"margin: {message}", file=sys.stderr)
    app.workspace.folders = lambda: [Path.cwd().as_uri()]
    return Services.over(app), uris


def message(args: argparse.Namespace) -> str:
    message = " ".join(args.message).strip()
    if not message and not sys.stdin.isatty():
        message = sys.stdin.read().strip()
    if not message:
        raise CliError("say something: margin chat \"your question\" (or pipe it on standard input)")
    return message
