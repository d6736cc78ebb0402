"""`margin-lsp`: the language server over stdio (default) or TCP. Over TCP every client presents a
token (margin.lsp.tcp): the one in MARGIN_TCP_TOKEN, else one made at start and written, readable
by the user alone, to the token file (`--token-file`, else `tcp-PORT.token` in Margin's runtime
folder). TCP listens on loopback only unless `--allow-remote` is given, which requires a token
chosen by the user."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from margin import __version__, logs
from margin.lsp.tcp import MIN_TOKEN_LENGTH, TOKEN_ENV

log = logging.getLogger(__name__)


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def _loopback(host: str) -> bool:
    from margin.core.api_keys import is_loopback

    return is_loopback(host)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="margin-lsp", description="Margin language server (stdio unless --tcp is given)."
    )
    parser.add_argument("--tcp", metavar="HOST:PORT", type=_host_port, help="listen on TCP instead of stdio")
    parser.add_argument("--allow-remote", action="store_true", help=(
        "with --tcp: allow an address other machines can reach; every client must then present the "
        f"token in ${TOKEN_ENV} as initializationOptions.tcpToken"))
    parser.add_argument("--token-file", metavar="PATH", default=None, help=(
        f"with --tcp and no ${TOKEN_ENV}: where to write the token made at start, readable by you "
        "alone, for the client to present (default: tcp-PORT.token in Margin's runtime folder)"))
    parser.add_argument("--stdio", action="store_true", help="use stdio (the default; accepted for clients that pass it)")
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO (default), WARNING or ERROR; also MARGIN_LOG_LEVEL")
    parser.add_argument("--log-file", default=None, help="write logs here instead of stderr; also MARGIN_LOG_FILE")
    parser.add_argument("--acp", action="store_true", help=(
        "speak the Agent Client Protocol on stdio instead (Margin's agent for Zed, JetBrains and other "
        "ACP clients; the same as `margin acp`)"))
    parser.add_argument("--version", action="version", version=f"margin-lsp {__version__}")
    args = parser.parse_args(argv)
    if args.acp:
        if args.tcp:
            parser.error("--acp talks on stdio: leave out --tcp")
        from margin import cli

        return cli.main([*(["--log-level", args.log_level] if args.log_level else []), "acp"])
    token = os.environ.pop(TOKEN_ENV, None) or None  # not passed on to programs Margin runs
    if args.tcp:
        host = args.tcp[0]
        if not _loopback(host) and not args.allow_remote:
            parser.error(f"--tcp {host}: Margin listens on loopback only (127.0.0.1, ::1, localhost), since "
                         "whoever connects can read the workspace and choose where prompts and keys go. "
                         f"To listen on {host}, add --allow-remote and set {TOKEN_ENV}.")
        if args.allow_remote and (token is None or len(token) < MIN_TOKEN_LENGTH):
            parser.error(f"--allow-remote needs a token every client must present: set {TOKEN_ENV} "
                         f"to a secret of at least {MIN_TOKEN_LENGTH} characters (e.g. `openssl rand -hex 32`).")
    elif args.allow_remote or args.token_file:
        parser.error(f"{'--allow-remote' if args.allow_remote else '--token-file'} goes with --tcp HOST:PORT")

    logs.configure(args.log_level, args.log_file)
    # pydantic looks for plugins in every installed package's metadata before its first model;
    # Margin uses none (a plugin would see the documents and settings Margin validates), and the
    # search costs start-up time (benchmarks/bench_startup.py). One set explicitly is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

    from margin.lsp.server import create_server
    from margin.wiring import build_app

    server = create_server(build_app())
    log.info("margin-lsp %s starting transport=%s", __version__, "tcp" if args.tcp else "stdio")
    if args.tcp:
        host, port = args.tcp
        if token is None:
            from margin.lsp.tcp import made_token

            token, where = made_token(port, args.token_file)
            log.info("tcp token made: the client presents the one in the token file")
            print(f"margin-lsp: the token clients present is in {where}", file=sys.stderr, flush=True)
        server.start_tcp(host, port, token=token)
    else:
        server.start_io(sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
