"""`a2a-grpc console TARGET`: a local web console over the client library (docs/console.md).

TARGET and every auth, TLS, tenant and transport option are the other client commands' own
(`client.cli.client_options`); the back end is `api.py` on aiohttp, guarded by `guard.py`; the
page is `static/`. The console listens on 127.0.0.1 (another `--host` is allowed, with a
warning), on a free port unless `--port` says which, prints its URL with the session token, and
opens a browser only with `--open`. It runs until interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import signal
import sys
import threading
import webbrowser

from aiohttp import web

from a2a_grpc.cli.console.api import SESSION, TOKEN, Session, routes
from a2a_grpc.cli.console.guard import QUERY, Guard
from a2a_grpc.client.cli import client_options
from a2a_grpc.client.cli_connection import UsageError, credentials_from_args, tls_config
from a2a_grpc.client.render import PROGRAM
from a2a_grpc.core import exit_codes

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROGRAM} console",
        parents=[client_options()],
        description="A local web console for TARGET: its card and the checks on it, sends and "
        "live streams, tasks, cancels, subscriptions and push configs, on any binding. It "
        "listens on 127.0.0.1 and prints a URL carrying a session token; open it in a browser.",
        epilog=exit_codes.help_text(("client",)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", metavar="TARGET")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; any other is reachable from elsewhere "
        "and is warned about)",
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port to listen on (default: a free one)"
    )
    parser.add_argument("--open", action="store_true", help="open the URL in a browser")
    return parser


def main(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error (2)
        return int(exit_.code or 0)
    args.audit_incomplete = None
    try:
        tls_config(args)  # options that cannot work fail now, not on the page
        credentials_from_args(args)
        if not 0 <= args.port < 65536:
            raise UsageError(f"--port {args.port}: a port is 0 to 65535")
    except UsageError as error:
        _say(str(error))
        return exit_codes.USAGE
    try:
        return asyncio.run(serve(args))
    except KeyboardInterrupt:
        return exit_codes.OK


async def serve(args: argparse.Namespace) -> int:
    """Serves the console until SIGINT or SIGTERM; the exit code."""
    guard = Guard()
    session = Session(args)
    app = web.Application(middlewares=[guard.middleware], client_max_size=64 * 1024**2)
    app[SESSION] = session
    app[TOKEN] = guard.token
    routes(app)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    try:
        await site.start()
    except OSError as error:
        await runner.cleanup()
        _say(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}")
        return exit_codes.USAGE
    port = _bound_port(runner)
    loopback = _is_loopback(args.host)
    names = [*LOOPBACK_NAMES, args.host] if loopback else [args.host, *LOOPBACK_NAMES]
    guard.listen_as(names, port)
    shown = "127.0.0.1" if loopback else args.host
    shown = f"[{shown}]" if ":" in shown else shown
    url = f"http://{shown}:{port}/?{QUERY}={guard.token}"
    if not loopback:
        _say(
            f"warning: listening on {args.host}, not only on this machine: anyone who can reach "
            "it and learns the URL acts with this console's credentials"
        )
    print(f"{PROGRAM} console: {url}", flush=True)
    if args.open:
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await session.close()
        await runner.cleanup()
    if args.audit_incomplete:
        _say(args.audit_incomplete)
        return exit_codes.AUDIT_INCOMPLETE
    return exit_codes.OK


def _bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        return int(address[1])
    raise RuntimeError("the console's site has no address")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _say(text: str) -> None:
    print(f"{PROGRAM} console: {text}", file=sys.stderr, flush=True)
