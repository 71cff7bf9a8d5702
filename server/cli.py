"""`a2a-grpc serve`: runs the server until SIGTERM or SIGINT, then shuts down gracefully.

With `--workers N` (N > 1) this process is only the supervisor of N worker processes that share
the port; server/ops/workers.py states how they start, stop and fail.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import logging
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

from a2a_grpc.core import exit_codes
from a2a_grpc.core.jose import KeyFormatError, KeySet, PrivateKey, load_jwks, load_private_key
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import environment
from a2a_grpc.server.addresses import bind_problem
from a2a_grpc.server.agent import AgentExecutor
from a2a_grpc.server.agent_loader import load_agent
from a2a_grpc.server.app import (
    PortInUseError,
    RunningServer,
    ServerPlan,
    StartupError,
    freeze_startup_objects,
    start_server,
)
from a2a_grpc.server.card import agent_card, load_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.ops import logs
from a2a_grpc.server.ops.telemetry import configure_from_environment
from a2a_grpc.server.ops.workers import Supervisor, serve_worker_command, watch_lifeline
from a2a_grpc.server.settings import HTTP_PORT_OFF, NOT_OPTIONS, parser
from a2a_grpc.server.startup import startup_report, summarize
from a2a_grpc.server.tasks.registry import redacted_url
from a2a_grpc.server.tasks.sealing import CredentialKeys
from a2a_grpc.server.trust.auth import TOKENS_ENV, load_tokens
from a2a_grpc.server.trust.tls import TlsFiles

log = logging.getLogger(__name__)


WORKERS_STOP_MARGIN = 10.0
"""Seconds a stopping worker gets beyond its --drain-delay and --shutdown-grace before the
supervisor kills it."""


def _read(path: str, option: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"{option} {path}: {exc.strerror}") from exc


def _tls(args: argparse.Namespace) -> TlsFiles | None:
    if not args.tls_cert and not args.tls_key:
        if args.client_ca:
            raise ValueError("--client-ca needs --tls-cert and --tls-key")
        return None
    if not (args.tls_cert and args.tls_key):
        raise ValueError("--tls-cert and --tls-key go together")
    files = TlsFiles(
        certificate_chain=_read(args.tls_cert, "--tls-cert"),
        private_key=_read(args.tls_key, "--tls-key"),
        client_ca=_read(args.client_ca, "--client-ca") if args.client_ca else None,
    )
    files.check()
    return files


ALTERNATIVES = (
    ("store", "store_file"),
    ("push_credentials_keys", "push_credentials_keys_file"),
)
"""Options (by dest) that give one setting two ways: a flag for either hides the environment
variables of both."""


def parse_args(
    argv: list[str], environ: Mapping[str, str] = os.environ
) -> tuple[argparse.Namespace, environment.Reading]:
    """The options `argv` gives and, for the others, what `environ` sets (server/environment.py
    states the rules), with what the environment set. A bad `argv` exits as argparse does
    (usage, 2); a bad variable is a SettingError naming it."""
    command = parser()
    args = command.parse_args(argv)
    reading = environment.read(
        command,
        environ,
        given=environment.given_on_command_line(command, argv),
        alternatives=ALTERNATIVES,
        others=(TOKENS_ENV,),
    )
    for dest, value in reading.values.items():
        setattr(args, dest, value)
    return args, reading


@dataclasses.dataclass
class Setup:
    """What `serve` will run: the plan for start_server (the checked configuration and what it
    loaded from files), and what this process needs besides."""

    plan: ServerPlan
    card_source: str
    """Where the card comes from, for the start-up line: a file, "derived from SPEC", "demo"."""
    worker_index: int | None = None
    """In a worker of `--workers N`: its index, from 1 (None: a server of its own)."""
    lifeline: int | None = None
    """In a worker: the file descriptor whose end of file says the supervisor is gone."""
    args: argparse.Namespace | None = None
    """The options it came from: SIGHUP reads the files they name again."""
    from_environment: environment.Reading = environment.NOTHING_READ
    """What the environment set: named in the start-up lines and in errors it caused."""

    @property
    def config(self) -> ServerConfig:
        return self.plan.config


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """The ServerConfig `args` give: each field from the option of the same name (NOT_OPTIONS
    aside), converted where an option's value is not the field's; ValueError when the config
    cannot serve."""
    values = {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(ServerConfig)
        if field.name not in NOT_OPTIONS
    }
    # --http-port: unset means the gRPC port + 1 (0 with --port 0), -1 means no HTTP port.
    http_port = args.http_port
    if http_port is None:
        http_port = 0 if args.port == 0 else args.port + 1
    values["http_port"] = None if http_port == HTTP_PORT_OFF else http_port
    values["reuse_port"] = args.worker_index is not None
    values["store"] = _store_url(args)
    if args.trusted_proxy is None:  # unset: ServerConfig's default (loopback)
        values["trusted_proxy"] = ServerConfig.trusted_proxy
    return ServerConfig(**values)


def _store_url(args: argparse.Namespace) -> str:
    """The store URL: `--store`, or what `--store-file` holds."""
    if not args.store_file:
        return str(args.store)
    if args.store:
        raise ValueError("--store and --store-file give one setting two ways: give one")
    url = _read(args.store_file, "--store-file").decode(errors="replace").strip()
    if not url:
        raise ValueError(f"--store-file {args.store_file} is empty: it must hold the store URL")
    return url


def setup(args: argparse.Namespace, read: environment.Reading = environment.NOTHING_READ) -> Setup:
    """Checks and loads what `args` name (`read`: what the environment set of them);
    ValueError (one line) for anything unusable.

    No message holds the store URL's password (they show `redacted_url`)."""
    if args.card_v03_fields and not args.compat_03:
        raise ValueError("--card-v03-fields is for A2A 0.3 callers: drop --no-compat-03")
    if (args.worker_index is None) != (args.worker_lifeline is None):
        raise ValueError("--worker-index and --worker-lifeline go together (set by --workers)")
    agent, card, card_source = _agent_and_card(args)
    loaded = Setup(
        plan=ServerPlan(
            config_from_args(args),
            agent,
            card,
            extended_card=load_card(args.extended_card) if args.extended_card else None,
            tokens=load_tokens(args.auth_tokens),
            tls=_tls(args),
            signature_keys=_signature_keys(args),
            card_signer=_card_signer(args),
            signing_keys=_jwks(args.publish_signing_keys, "--publish-signing-keys"),
            signer_card_keys=_signer_card_keys(args),
            push_credentials=_push_credentials(args),
        ),
        card_source=card_source,
        worker_index=args.worker_index,
        lifeline=args.worker_lifeline,
        args=args,
        from_environment=read,
    )
    return loaded


def _push_credentials(args: argparse.Namespace) -> CredentialKeys | None:
    """The keys `--push-credentials-keys` or `--push-credentials-keys-file` give (KeyFileError,
    a ValueError, when unusable)."""
    keys, path = args.push_credentials_keys, args.push_credentials_keys_file
    if keys and path:
        raise ValueError(
            "--push-credentials-keys and --push-credentials-keys-file give one setting two "
            "ways: give one"
        )
    if path:
        return CredentialKeys.from_file(path)
    return CredentialKeys.from_text(keys) if keys else None


def _agent_and_card(
    args: argparse.Namespace,
) -> tuple[AgentExecutor, a2a_pb2.AgentCard | None, str]:
    """The agent, its card (None: the demo card) and where the card comes from."""
    if args.agent is None:
        agent: AgentExecutor = DemoAgent()
    else:
        agent = load_agent(args.agent).agent
    if args.card:
        return agent, load_card(args.card), args.card
    if args.agent is None:
        return agent, None, "demo"
    try:
        return agent, agent_card(agent), f"derived from {args.agent}"
    except ValueError as exc:
        raise ValueError(
            f"--agent {args.agent!r}: cannot describe it: {exc}; or give --card"
        ) from exc


def _signature_keys(args: argparse.Namespace) -> KeySet | None:
    if args.require_signed_messages and not (args.signature_keys or args.trusted_signer_cards):
        raise ValueError(
            "--require-signed-messages needs --signature-keys or --trusted-signer-cards"
        )
    return _jwks(args.signature_keys, "--signature-keys")


def _signer_card_keys(args: argparse.Namespace) -> KeySet | None:
    if args.signer_card_keys and not args.trusted_signer_cards:
        raise ValueError("--signer-card-keys needs --trusted-signer-cards")
    return _jwks(args.signer_card_keys, "--signer-card-keys")


def _jwks(path: str | None, option: str) -> KeySet | None:
    if not path:
        return None
    try:
        return load_jwks(path)
    except (KeyFormatError, OSError) as exc:
        raise ValueError(f"{option} {path}: {exc}") from exc


def _card_signer(args: argparse.Namespace) -> tuple[PrivateKey, str] | None:
    if not args.card_signing_key and not args.card_signing_kid:
        return None
    if not (args.card_signing_key and args.card_signing_kid):
        raise ValueError("--card-signing-key and --card-signing-kid go together")
    pem = _read(args.card_signing_key, "--card-signing-key")
    try:
        return load_private_key(pem), args.card_signing_kid
    except KeyFormatError as exc:
        raise ValueError(f"--card-signing-key {args.card_signing_key}: {exc}") from exc


async def _serve(setup: Setup) -> int:
    worker = "" if setup.worker_index is None else f"[worker {setup.worker_index}]"
    say = functools.partial(_say, program=f"a2a-grpc{worker}")
    telemetry = configure_from_environment()
    try:
        running = await start_server(setup.plan)
    except PortInUseError as exc:
        print(f"a2a-grpc serve{worker}: {exc}", file=sys.stderr)
        return exit_codes.CANNOT_LISTEN
    except StartupError as exc:
        blame = setup.from_environment.blame(str(exc))
        print(f"a2a-grpc serve{worker}: {exc}{blame}", file=sys.stderr)
        return exit_codes.USAGE
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stop_signal() -> None:
        if stop.is_set():  # the second: drain now
            running.skip_drain_delay()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_signal)
    loop.add_signal_handler(signal.SIGHUP, reload, setup, running)
    if setup.lifeline is not None:

        def supervisor_gone() -> None:
            say("the supervisor is gone")
            stop.set()

        watch_lifeline(setup.lifeline, supervisor_gone)
    summary = summarize(
        running,
        setup.plan,
        setup.card_source,
        telemetry,
        from_environment=tuple(setup.from_environment.sources.values()),
    )
    for line in startup_report(summary):
        if line.warning:
            log.warning("%s", line.text)
        else:
            say(line.text)
    config = setup.config
    freeze_startup_objects()
    await stop.wait()
    if config.drain_delay > 0 and not running.drain_delay_skipped:
        say(
            f"shutting down: NOT_SERVING; serving as usual for {config.drain_delay:g} s more "
            "(--drain-delay; a second SIGTERM/SIGINT drains now)"
        )
    else:
        say("shutting down: NOT_SERVING")
    drained = (
        f"draining: GOAWAY and closing the ports; running work gets {config.shutdown_grace:g} s"
    )
    await running.stop(on_drain=lambda: say(drained))
    return 0


def reload(setup: Setup, running: RunningServer) -> None:
    """SIGHUP: reads the bearer tokens (`--auth-tokens` and `$A2A_GRPC_TOKENS`), the TLS files
    and the published signing keys (`--publish-signing-keys`) again and serves new calls,
    handshakes and card requests with them. Each is reloaded on its own; one that cannot be
    used is kept as it was, and one log line says why."""
    args = setup.args
    publishes_keys = setup.plan.signing_keys is not None  # an empty key set counts too
    if args is None or not (setup.plan.tokens or setup.plan.tls or publishes_keys):
        log.warning(
            "SIGHUP: nothing to reload (the server uses no bearer tokens and no TLS, and "
            "publishes no signing keys)"
        )
        return

    def signing_keys() -> str:
        keys = _jwks(args.publish_signing_keys, "--publish-signing-keys")
        if keys is None:  # the options did not change, so this cannot happen
            raise ValueError("no --publish-signing-keys file is named")
        running.reload_signing_keys(keys)
        return f"published the signing keys in {args.publish_signing_keys} ({len(keys)})"

    def tokens() -> str:
        loaded = load_tokens(args.auth_tokens)
        running.reload_tokens(loaded)
        return f"reloaded the bearer tokens ({len(loaded)})"

    def tls() -> str:
        files = _tls(args)
        if files is None:  # the options did not change, so this cannot happen
            raise ValueError("no TLS files are named")
        running.reload_tls(files)
        return f"reloaded the TLS certificate from {args.tls_cert}"

    for used, kept, part in (
        (publishes_keys, "previously published signing keys", signing_keys),
        (setup.plan.tokens, "previous bearer tokens", tokens),
        (setup.plan.tls, "previous TLS certificate", tls),
    ):
        if used:
            try:
                done = part()
            except ValueError as exc:
                log.warning("SIGHUP: kept the %s: %s", kept, exc)
            else:
                log.info("SIGHUP: %s", done)


_LINE_FORMAT = ["text"]
"""The --log-format the start-up lines follow (set once by `main`)."""


def _say(text: str, program: str = "a2a-grpc") -> None:
    # One write per line (print would write the newline apart when stdout is unbuffered), so
    # the lines of workers sharing one stdout never interleave.
    print(logs.startup_line(text, program, _LINE_FORMAT[0]) + "\n", end="", flush=True)


def _supervise(setup: Setup, argv: list[str]) -> int:
    """`--workers N`: checks the ports are free, then runs N workers until they stop."""
    config = setup.config
    ports = [config.port] if config.http_port is None else [config.port, config.http_port]
    for port in ports:
        problem = bind_problem(config.host, port)
        if problem is not None:
            print(f"a2a-grpc serve: {problem}", file=sys.stderr)
            return exit_codes.CANNOT_LISTEN
    _say(
        f"starting {config.workers} workers sharing {config.host}:{config.port}, tasks in "
        f"{redacted_url(config.store)}"
    )
    supervisor = Supervisor(
        serve_worker_command(argv),
        config.workers,
        stop_timeout=config.drain_delay + config.shutdown_grace + WORKERS_STOP_MARGIN,
    )
    code = asyncio.run(supervisor.run())
    _say(f"all workers stopped{'' if code == 0 else f'; exit status {code}'}")
    return code


def main(argv: list[str]) -> int:
    """Runs `serve` with `argv` (the options after `serve`); returns the exit status
    (core/exit_codes.py): OK after a clean stop, CANNOT_LISTEN when a port cannot be bound,
    USAGE for a configuration that cannot be served (one line on stderr, never the store URL's
    password); with `--workers N`, see server/ops/workers.py."""
    # A SIGHUP before the reload handler is installed is ignored rather than fatal (its default
    # action); workers inherit this until their own handler is in place.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        args, read = parse_args(argv)
    except environment.SettingError as exc:
        print(f"a2a-grpc serve: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    logs.configure(args.log_level, args.log_format)
    _LINE_FORMAT[0] = args.log_format
    if args.worker_index is None:  # the supervisor of --workers warns for its workers
        for line in read.unread:
            log.warning("%s", line)
    try:
        loaded = setup(args, read)
    except ValueError as exc:
        print(f"a2a-grpc serve: {exc}{read.blame(str(exc))}", file=sys.stderr)
        return exit_codes.USAGE
    if loaded.config.workers > 1:
        return _supervise(loaded, argv)
    return asyncio.run(_serve(loaded))
