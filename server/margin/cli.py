"""`margin`: Margin from a terminal, over the same services as the language server.

Settings come from a JSON file holding the same object as the editor's `margin` section
(`--settings FILE`, else $MARGIN_SETTINGS, else `settings.json` in Margin's user config
folder, when present), overlaid by MARGIN_<PROFILE>_<FIELD> environment variables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import platformdirs

from margin import __version__, logs
from margin.core.settings import Source
from margin.services.app import MarginApp
from margin.services.diagnosis import ProfileReport, diagnose


def default_settings_path() -> Path:
    return Path(platformdirs.user_config_dir("margin")) / "settings.json"


class CliError(Exception):
    """A problem the user can fix; printed without a traceback."""


def load_app(settings_path: str | None) -> tuple[MarginApp, str]:
    from margin.wiring import build_app

    app = build_app()
    if app.settings.startup_problems:
        raise CliError("invalid settings: " + "; ".join(map(str, app.settings.startup_problems)))
    explicit = settings_path or os.environ.get("MARGIN_SETTINGS")
    path = Path(explicit) if explicit else default_settings_path()
    if not path.exists():
        if explicit:
            raise CliError(f"settings file {path} does not exist")
        return app, "built-in defaults and environment variables"
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CliError(f"cannot read settings file {path}: {error}") from None
    if isinstance(values, dict) and isinstance(values.get("margin"), dict):
        values = values["margin"]
    problems = app.settings.update("init", Source(f"settings file {path}", values))
    if problems:
        raise CliError("invalid settings: " + "; ".join(map(str, problems)))
    return app, f"{path}, overlaid by environment variables"


def _yes_no(value: bool | None) -> str:
    return "not checked (profile disabled)" if value is None else ("yes" if value else "NO")


def render_report(reports: Sequence[ProfileReport], settings_from: str) -> str:
    lines = [f"Margin {__version__} doctor", f"settings: {settings_from}", ""]
    for r in reports:
        lines.append(f"{r.name}{'' if r.enabled else '  (disabled)'}")
        backend = f"{r.base_url}" + (f"  [{r.backend}]" if r.backend else "")
        rows = [
            ("backend", backend),
            ("reachable", _yes_no(r.reachable)),
            ("model", r.model or "(the server's default)"),
            ("api key", r.api_key),
            ("context window", f"{r.context_window} tokens ({r.context_window_source})"),
            ("tokenizer", f"{r.tokenizer} ({'exact' if r.exact else 'approximate'}"
                          + (f"; {r.tokenizer_state}" if r.tokenizer_state.startswith("unavailable") else "")
                          + ")"),
        ]
        if r.error:
            rows.append(("problem", r.error))
        lines.extend(f"  {label:<15} {value}" for label, value in rows)
        lines.append("")
    failing = [r for r in reports if r.enabled and (not r.reachable or r.error)]
    enabled = [r for r in reports if r.enabled]
    if failing:
        lines.append(f"{len(failing)} of {len(enabled)} enabled profiles have a problem: "
                     + ", ".join(r.name for r in failing))
    else:
        lines.append(f"All {len(enabled)} enabled profiles are ready.")
    return "\n".join(lines)


async def _doctor(args: argparse.Namespace) -> int:
    app, settings_from = load_app(args.settings)
    try:
        reports = await diagnose(app.settings.current, app.backends, app.tokenizers,
                                 fresh=True, wait_for_tokenizers=True)
    finally:
        await app.aclose()
    if args.json:
        print(json.dumps({"version": __version__, "settingsFrom": settings_from,
                          "profiles": [r.as_dict() for r in reports]}, indent=2))
    else:
        print(render_report(reports, settings_from))
    return 1 if any(r.enabled and (not r.reachable or r.error) for r in reports) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="margin", description="Margin from the terminal.")
    parser.add_argument("--version", action="version", version=f"margin {__version__}")
    parser.add_argument("--settings", metavar="FILE", help="JSON settings (the editor's `margin` section)")
    parser.add_argument("--log-level", default="WARNING", help="log level for stderr (default WARNING)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor = commands.add_parser(
        "doctor", help="check every profile: backend reachable, context window, tokenizer"
    )
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    doctor.set_defaults(run=_doctor)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    logs.configure(args.log_level)
    try:
        return asyncio.run(args.run(args))
    except CliError as error:
        print(f"margin: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
