"""The client half of the `a2a-grpc` command: send, get, list, cancel, subscribe, card.

This module parses the arguments, runs one command and turns its outcome into an exit code (the
EXIT_* constants, from the one table in core/exit_codes.py; `EXIT_CODES_HELP` is what a
command's --help shows). Every failure ends with one line on stderr, never a traceback. How
tasks, cards and streams look is client/render.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import mimetypes
import os
import re
import shlex
import shutil
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message

from a2a_grpc.client.card import (
    GRPC_BINDING,
    TRANSPORT_NAMES,
    card_url,
    select_interface,
)
from a2a_grpc.client.channel import (
    DEFAULT_MAX_MESSAGE_BYTES,
    LB_POLICIES,
)
from a2a_grpc.client.cli_connection import (
    HOST_PORT,
    Connection,
    UsageError,
    allowed_transports,
    fetch_card,
    is_url,
    tls_config,
)
from a2a_grpc.client.errors import (
    A2AClientError,
    A2ATransportError,
    AgentCardError,
    CredentialsError,
    DeadlineExceededError,
    RpcFailedError,
    StreamResumeError,
    UnavailableError,
)
from a2a_grpc.client.follow import StreamItem
from a2a_grpc.client.messages import data_part, file_part, url_part, user_message
from a2a_grpc.client.reducer import TaskView
from a2a_grpc.client.render import (
    PROGRAM,
    LivePrinter,
    json_line,
    render_card,
    render_message,
    render_outcome,
    render_task,
    render_task_list,
    reply_hint,
)
from a2a_grpc.client.state_names import parse_state_name, state_name
from a2a_grpc.core import audit_chain, exit_codes, release
from a2a_grpc.core.budget import with_budget
from a2a_grpc.core.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidAgentResponseError,
    StatusError,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from a2a_grpc.core.states import INTERRUPTED_STATES, TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2

EXIT_OK = exit_codes.OK
EXIT_INTERNAL = exit_codes.INTERNAL
EXIT_USAGE = exit_codes.USAGE
EXIT_TASK_FAILED = exit_codes.TASK_FAILED
EXIT_TASK_WAITING = exit_codes.TASK_WAITING
EXIT_AGENT_ERROR = exit_codes.AGENT_ERROR
EXIT_COULD_NOT_TALK = exit_codes.COULD_NOT_TALK
EXIT_INVALID_RESPONSE = exit_codes.INVALID_RESPONSE
EXIT_AUDIT_INCOMPLETE = exit_codes.AUDIT_INCOMPLETE
EXIT_AGENT_BUSY = exit_codes.AGENT_BUSY
EXIT_INTERRUPTED = exit_codes.INTERRUPTED
EXIT_BROKEN_PIPE = exit_codes.BROKEN_PIPE

EXIT_CODES_HELP = exit_codes.help_text(("client",))

DEFAULT_CURRENCY = "USD"

NO_EXTENDED_CARD = (
    UnsupportedOperationError,
    ExtendedAgentCardNotConfiguredError,
    UnauthenticatedError,
)
"""GetExtendedAgentCard's refusals after which `card host:port` shows the public card."""
PUBLIC_CARD_TIMEOUT_S = 5.0
"""Seconds `card host:port` gives the public card's fetch when --timeout is not set."""

_SIZE = re.compile(r"^(\d+)\s*((?:[KkMmGg](?:i?[Bb])?)?)$")
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def main(argv: list[str]) -> int:
    """Runs one client command; returns the process exit code (one of the EXIT_* constants)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return int(exit_.code or 0)
    if args.command is None:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE
    args.audit_incomplete = None
    args.seen_task = None  # (task id, state) of the task a stream named, for the last line
    # The audit writer's ERROR records would reach stderr through logging's last resort; the
    # command reports an incomplete trail in its own one line instead.
    logging.getLogger(audit_chain.__name__).addHandler(logging.NullHandler())
    code = _run(args)
    if args.audit_incomplete is not None:
        _fail(args.audit_incomplete)
        if code == EXIT_OK:
            return EXIT_AUDIT_INCOMPLETE
    return code


def _run(args: argparse.Namespace) -> int:
    """Runs the command; every way it can end becomes an exit code and at most one line."""
    try:
        code: int = asyncio.run(args.run(args))
        return code
    except KeyboardInterrupt:
        _fail("interrupted" + _still_running(args))
        return EXIT_INTERRUPTED
    except UsageError as error:
        _fail(str(error))
        return EXIT_USAGE
    except InvalidAgentResponseError as error:
        _fail(f"the agent's response broke the A2A protocol: {error.message}")
        return EXIT_INVALID_RESPONSE
    except StatusError as error:
        _fail(f"the agent returned {type(error).__name__}: {error.message}")
        if error.retryable:
            return EXIT_AGENT_BUSY
        return EXIT_AGENT_ERROR
    except A2ATransportError as error:
        _fail(
            f"could not talk to the agent ({error.code.name}): {error.details}"
            + _target_hint(args, error)
            + (_still_running(args) if isinstance(error, DeadlineExceededError) else "")
        )
        return EXIT_COULD_NOT_TALK
    except AgentCardError as error:
        _fail(str(error))
        return EXIT_COULD_NOT_TALK
    except RpcFailedError as error:
        _fail(f"the agent's call failed with {error}" + _size_hint(args, error))
        return EXIT_AGENT_ERROR
    except CredentialsError as error:  # a token file or token endpoint: named in the message
        _fail(str(error))
        return EXIT_COULD_NOT_TALK if error.retryable else EXIT_USAGE
    except StreamResumeError as error:  # the stream was cut: the task may well go on
        _fail(
            f"{error}; `{_program()} get {args.target} {error.task_id}"
            + (f" --transport {args.transport}" if args.transport else "")
            + "` shows where it stands"
        )
        return EXIT_COULD_NOT_TALK
    except A2AClientError as error:  # any other could-not-talk case
        _fail(str(error))
        return EXIT_COULD_NOT_TALK
    except BrokenPipeError:  # stdout's reader left (e.g. `| head -1`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit-time flush cannot fail again
        return EXIT_BROKEN_PIPE
    except Exception as error:  # the one-line promise holds even for our own bugs
        _fail(f"internal error: {type(error).__name__}: {error}")
        return EXIT_INTERNAL


# --- commands -----------------------------------------------------------------------------------


async def _send(args: argparse.Namespace) -> int:
    message = _message(args)
    async with Connection(args) as client:
        if not args.stream:
            result = await client.send_message(message, timeout=args.timeout)
            if isinstance(result, a2a_pb2.Message):
                _emit(args, a2a_pb2.SendMessageResponse(message=result), render_message(result))
                return EXIT_OK
            _emit(args, a2a_pb2.SendMessageResponse(task=result), render_task(result))
            code = _exit_for(result.status.state)
            if code is None:
                raise InvalidAgentResponseError(
                    f"a blocking SendMessage returned task {result.id} still "
                    f"{state_name(result.status.state)}"
                )
            _hint(args, result)
            return code
        stream = client.send_streaming_message(message, timeout=args.timeout)
        return await _follow(args, stream)


async def _subscribe(args: argparse.Namespace) -> int:
    async with Connection(args) as client:
        return await _follow(args, client.subscribe_to_task(args.id, timeout=args.timeout))


async def _get(args: argparse.Namespace) -> int:
    request = a2a_pb2.GetTaskRequest(id=args.id)
    if args.history is not None:
        request.history_length = args.history
    async with Connection(args) as client:
        task = await client.get_task(request, timeout=args.timeout)
    _emit(args, task, render_task(task, history=True))
    return EXIT_OK


async def _list(args: argparse.Namespace) -> int:
    request = a2a_pb2.ListTasksRequest(context_id=args.context_id or "", page_token=args.page_token)
    if args.state:
        request.status = _parse_state(args.state)
    if args.page_size is not None:
        request.page_size = args.page_size
    async with Connection(args) as client:
        response = await client.list_tasks(request, timeout=args.timeout)
    _emit(args, response, render_task_list(response))
    return EXIT_OK


async def _cancel(args: argparse.Namespace) -> int:
    async with Connection(args) as client:
        task = await client.cancel_task(args.id, timeout=args.timeout)
    _emit(args, task, render_task(task))
    return EXIT_OK


async def _card(args: argparse.Namespace) -> int:
    if not is_url(args.target):
        try:
            async with Connection(args) as client:
                card = await client.get_extended_agent_card(timeout=args.timeout)
        except NO_EXTENDED_CARD as refused:
            return await _public_card_instead(args, refused)
        _emit(args, card, render_card(card))
        return EXIT_OK
    card = await fetch_card(args.target, args.timeout, tls_config(args))
    try:
        chosen = select_interface(card, allowed_transports(args))
        used = f"  uses: {chosen.protocol_binding} {chosen.protocol_version} {chosen.url}"
    except AgentCardError as error:
        used = f"  uses: nothing: {error}"
    _emit(args, card, render_card(card) + "\n" + used)
    return EXIT_OK


async def _public_card_instead(args: argparse.Namespace, refused: StatusError) -> int:
    """`card host:port` where GetExtendedAgentCard is refused (no extended card, or not for
    this caller): the public card, which A2A serves over HTTP only. It is looked for where an
    a2a-grpc server serves it, on the gRPC port + 1, and shown if it names this gRPC port;
    otherwise the one line says how to fetch it."""
    why = f"GetExtendedAgentCard: {type(refused).__name__}: {refused.message}"
    host, port = host_and_port(args.target)
    if port is None:
        _fail(
            f"{why}; the public agent card is served over HTTP: `{_program()} card "
            "http(s)://HOST:PORT` with the agent's HTTP port"
        )
        return EXIT_AGENT_ERROR
    tls = tls_config(args)
    scheme = "https" if tls is not None else "http"
    url = f"{scheme}://{host}:{port + 1}"
    try:
        card = await fetch_card(url, args.timeout or PUBLIC_CARD_TIMEOUT_S, tls)
    except (A2AClientError, StatusError, UsageError):
        card = None
    if card is None or not names_grpc_port(card, port):
        _fail(
            f"{why}; the public agent card is served over HTTP: `{_program()} card "
            f"{scheme}://{host}:HTTP_PORT` with the agent's HTTP port ({url} is an a2a-grpc "
            "server's default, and it serves no card for this agent)"
        )
        return EXIT_AGENT_ERROR
    note = f"  from: {card_url(url)}, the public card ({why})"
    _emit(args, card, render_card(card) + "\n" + note)
    return EXIT_OK


def host_and_port(target: str) -> tuple[str, int | None]:
    """(host, port) of a single `host:port` target; port None for a list or a `dns:` name."""
    match = HOST_PORT.match(target)
    if match is None:
        return target, None
    return target[: match.start(1) - 1], int(match.group(1))


def names_grpc_port(card: a2a_pb2.AgentCard, port: int) -> bool:
    """Whether `card` lists a gRPC interface on `port`: the card fetched is this agent's."""
    for interface in card.supported_interfaces:
        if interface.protocol_binding.upper() != GRPC_BINDING:
            continue
        address = interface.url.rpartition("://")[2].rstrip("/")
        if address.rpartition(":")[2] == str(port):
            return True
    return False


# --- streams ------------------------------------------------------------------------------------


async def _follow(args: argparse.Namespace, stream: AsyncGenerator[StreamItem, None]) -> int:
    printer = LivePrinter(sys.stdout)
    view = TaskView()
    # Closed here however reading stops (stdout gone, Ctrl-C): the stream's call is closed in
    # order, before the event loop ends, rather than by its shutdown, where closing an HTTP
    # stream fails with a traceback.
    async with contextlib.aclosing(stream):
        async for event, latest in stream:
            view = latest
            if view.task_id:
                args.seen_task = (view.task_id, view.state)
            if args.json:
                print(json_line(event), flush=True)
            else:
                printer.show(event)
    printer.close_line()
    if view.message is not None:
        return EXIT_OK
    if not args.json:
        print(render_outcome(view), flush=True)
    if view.task is not None:
        _hint(args, view.task)
    return _exit_for(view.state) or EXIT_OK


# --- plumbing -----------------------------------------------------------------------------------


def _message(args: argparse.Namespace) -> a2a_pb2.Message:
    parts: list[a2a_pb2.Part | str] = [args.text]
    if args.data is not None:
        try:
            parts.append(data_part(json.loads(args.data)))
        except ValueError as error:
            raise UsageError(f"--data is not valid JSON: {error}") from error
    if args.file is not None:
        path = Path(args.file)
        try:
            raw = path.read_bytes()
        except OSError as error:
            raise UsageError(f"cannot read --file {args.file!r}: {error.strerror}") from error
        media_type = args.media_type or mimetypes.guess_type(path.name)[0] or ""
        parts.append(file_part(raw, filename=path.name, media_type=media_type))
    if args.url is not None:
        media_type = args.media_type or mimetypes.guess_type(args.url)[0] or ""
        parts.append(url_part(args.url, media_type=media_type))
    message = user_message(
        *parts,
        task_id=args.task_id or "",
        context_id=args.context_id or "",
        reference_task_ids=args.reference,
    )
    if args.budget is None:
        if args.currency is not None:
            raise UsageError("--currency goes with --budget (the currency of that budget)")
        return message
    try:
        return with_budget(message, args.budget, args.currency or DEFAULT_CURRENCY)
    except (ValueError, ArithmeticError) as error:
        raise UsageError(f"--budget {args.budget!r}: {error}") from error


def _exit_for(state: int) -> int | None:
    if state == a2a_pb2.TASK_STATE_COMPLETED:
        return EXIT_OK
    if state in TERMINAL_STATES:
        return EXIT_TASK_FAILED
    if state in INTERRUPTED_STATES:
        return EXIT_TASK_WAITING
    return None


def _hint(args: argparse.Namespace, task: a2a_pb2.Task) -> None:
    # The answer goes over the same binding as the question.
    target = f"{args.target} --transport {args.transport}" if args.transport else args.target
    hint = reply_hint(target, task, _program())
    if hint is not None and not args.json:
        print(hint, file=sys.stderr)


def _still_running(args: argparse.Namespace) -> str:
    """What an interrupted or timed-out command adds: how to find the task that goes on."""
    if getattr(args, "command", None) not in ("send", "subscribe"):
        return ""
    seen = getattr(args, "seen_task", None)
    program = _program()
    if seen is None or seen[1] in TERMINAL_STATES:
        if seen is None and args.command == "send":
            return (
                f"; the task, if the agent took the message, goes on: `{program} list "
                f"{args.target}` shows it (send --stream shows its id at once)"
            )
        return ""
    task_id, state = seen
    return (
        f"; task {task_id} goes on ({state_name(state)}): follow it with `{program} subscribe "
        f"{args.target} {task_id}`, or stop it with `{program} cancel {args.target} {task_id}`"
    )


def _target_hint(args: argparse.Namespace, error: A2ATransportError) -> str:
    """What to type instead when the failure says TARGET is not what it was given as: an HTTP
    server given as a gRPC `host:port`, TLS on one side only, or a server that wants a client
    certificate (mutual TLS) and got none."""
    if not isinstance(error, UnavailableError):
        return ""
    details = error.details.lower()
    if not is_url(args.target) and ("http1.x server" in details or "settings frame" in details):
        scheme = "https" if tls_config(args) is not None else "http"
        return (
            f" ({args.target} answers HTTP/1.x, not gRPC: an agent served over HTTP is reached "
            f"by its URL, `{_program()} {args.command} {scheme}://{args.target} ...`, whose agent "
            "card picks the binding)"
        )
    tls = tls_config(args)
    plaintext = tls is None and not (is_url(args.target) and args.target.startswith("https"))
    hung_up = "socket closed" in details or "server disconnected" in details
    if not plaintext and hung_up and (tls is None or tls.client_certificate is None):
        # A server that asks for a client certificate and gets none ends the handshake.
        return (
            " (the server probably requires a client certificate, mutual TLS: add --cert PEM "
            "--key PEM)"
        )
    if plaintext and "socket closed" in details:
        return " (if the server uses TLS, add --tls, and --ca PEM for a private CA)"
    if not plaintext and ("handshake" in details or "ssl" in details):
        return (
            " (the TLS handshake failed: check --ca, --server-name, and that the server uses TLS)"
        )
    return ""


def _size_hint(args: argparse.Namespace, error: RpcFailedError) -> str:
    """A hint when gRPC refused a message over the client's own size limit."""
    if error.code != grpc.StatusCode.RESOURCE_EXHAUSTED or "CLIENT:" not in error.details:
        return ""
    limit = args.max_message_size or DEFAULT_MAX_MESSAGE_BYTES
    return (
        f" (this client's limit is {limit} bytes for a gRPC message, each way: raise it with "
        "--max-message-size BYTES)"
    )


def _message_size(text: str) -> int:
    """`--max-message-size`: bytes, or with a binary suffix (`64MiB`, `64M`, `512KiB`)."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r} (bytes, or with KiB, MiB or GiB: 64MiB)"
        )
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()[:1]]
    if not 0 < value < 2**31:
        raise argparse.ArgumentTypeError("must be from 1 byte to under 2 GiB (gRPC's limit)")
    return value


def _program() -> str:
    """How the user can run this command again: `a2a-grpc` when that name on PATH is this
    program, else the path it was started by (`.venv/bin/a2a-grpc` outside the virtualenv)."""
    invoked = sys.argv[0]
    if os.path.basename(invoked) != PROGRAM:  # e.g. python -m a2a_grpc.cli.main
        return PROGRAM
    found = shutil.which(PROGRAM)
    if found is not None and os.path.realpath(found) == os.path.realpath(invoked):
        return PROGRAM
    return shlex.quote(invoked)


def _parse_state(text: str) -> a2a_pb2.TaskState:
    try:
        state = parse_state_name(text)
    except ValueError:
        state = a2a_pb2.TASK_STATE_UNSPECIFIED
    if state == a2a_pb2.TASK_STATE_UNSPECIFIED:
        names = ", ".join(state_name(value) for value in a2a_pb2.TaskState.values() if value)
        raise UsageError(f"unknown --state {text!r}: use one of {names}") from None
    return state


def _emit(args: argparse.Namespace, message: Message, text: str) -> None:
    print(json_line(message) if args.json else text, flush=True)


def _fail(text: str) -> None:
    print(f"{PROGRAM}: {' '.join(text.split())}", file=sys.stderr, flush=True)


def client_options() -> argparse.ArgumentParser:
    """The options every client command shares (TARGET's auth, TLS, tenant, transport,
    timeouts, audit): a parent parser (`parents=[client_options()]`), so that `console` takes
    exactly what `send` and `get` take."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print ProtoJSON, one per line")
    common.add_argument("--timeout", type=_seconds, metavar="S", help="deadline in seconds")
    common.add_argument(
        "--token",
        help="bearer token sent as `authorization` (default: $A2A_TOKEN)",
    )
    common.add_argument(
        "--token-file",
        metavar="PATH",
        help="send the bearer token this file holds, read again whenever the file changes "
        "(a Kubernetes projected token, a JWT-SVID); default: $A2A_TOKEN_FILE",
    )
    common.add_argument(
        "--oauth-token-url",
        metavar="URL",
        help="get the bearer token from this OAuth 2.0 token endpoint (client credentials "
        "grant), cached until shortly before it expires; needs --oauth-client-id and "
        "--oauth-client-secret-file",
    )
    common.add_argument("--oauth-client-id", metavar="ID", help="the OAuth client's id")
    common.add_argument(
        "--oauth-client-secret-file",
        metavar="PATH",
        help="file holding the OAuth client's secret (read at each token request)",
    )
    common.add_argument("--oauth-scope", metavar="SCOPE", help="scope to ask the token for")
    common.add_argument(
        "--oauth-audience", metavar="AUDIENCE", help="audience to ask the token for"
    )
    common.add_argument(
        "--oauth-client-auth",
        choices=("client_secret_basic", "client_secret_post"),
        default="client_secret_basic",
        help="how the client authenticates to the token endpoint: HTTP Basic (default) or "
        "the id and secret in the form",
    )
    common.add_argument("--tenant", help="tenant for every request (default: the card's)")
    common.add_argument(
        "--extension", action="append", default=[], metavar="URI", help="activate an extension"
    )
    common.add_argument(
        "--transport",
        type=str.lower,
        choices=tuple(TRANSPORT_NAMES),
        help="with a card URL as TARGET, use this binding (default: the card's first interface "
        "this client speaks; host:port is always grpc)",
    )
    common.add_argument("--tls", action="store_true", help="use TLS (system roots by default)")
    common.add_argument("--ca", metavar="PEM", help="root certificates for TLS")
    common.add_argument("--cert", metavar="PEM", help="client certificate for mutual TLS")
    common.add_argument("--key", metavar="PEM", help="client key for mutual TLS")
    common.add_argument(
        "--server-name",
        metavar="NAME",
        help="name the server's TLS certificate is checked against; implies --tls (default: "
        "TARGET's host; needed with TLS to a list of addresses)",
    )
    common.add_argument(
        "--lb-policy",
        choices=LB_POLICIES,
        help="how calls are spread over TARGET's addresses (default: round_robin for a list or "
        "a dns: name, pick_first for one address)",
    )
    common.add_argument(
        "--max-message-size",
        type=_message_size,
        metavar="BYTES",
        help=f"largest gRPC message this client sends or takes, e.g. 64MiB (default: "
        f"{DEFAULT_MAX_MESSAGE_BYTES // 1024**2}MiB); the HTTP bindings have no such limit",
    )
    common.add_argument(
        "--audit-log",
        metavar="FILE",
        help="append a hash-chained record of every call to FILE (`a2a-grpc audit verify FILE`; "
        "`a2a-grpc audit match FILE SERVER_LOG` compares it with the server's)",
    )

    return common


def _parser() -> argparse.ArgumentParser:
    common = client_options()

    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="A2A 1.0 over gRPC. `a2a-grpc serve --help` runs a server; the other "
        "commands are a client. TARGET is host:port (gRPC), several servers as "
        "ip:port,ip:port,... or dns:///host:port (calls spread round-robin), or the http(s) URL "
        "of an agent card (its first interface this client speaks: gRPC, JSON-RPC or HTTP+JSON; "
        "--transport picks one).",
        epilog=exit_codes.help_text(("client", "serve", "audit")),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=release.version_line())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Dispatched by cli/main.py before this parser runs; listed here so that --help shows them.
    commands.add_parser("serve", help="run an A2A server (`a2a-grpc serve --help`)")
    commands.add_parser(
        "audit",
        help="check an audit trail (`a2a-grpc audit verify FILE`) or match a client's with a "
        "server's (`a2a-grpc audit match CLIENT SERVER`)",
    )
    commands.add_parser(
        "keys", help="make a message-signing key pair (`a2a-grpc keys new --kid KID`)"
    )
    commands.add_parser(
        "console",
        help="a local web console for TARGET: its card, sends, streams and tasks "
        "(`a2a-grpc console --help`)",
    )

    def command(name: str, run: Callable[[argparse.Namespace], Awaitable[int]], help: str) -> Any:
        sub = commands.add_parser(
            name,
            parents=[common],
            help=help,
            description=help,
            epilog=EXIT_CODES_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.set_defaults(run=run)
        sub.add_argument("target", metavar="TARGET")
        return sub

    send = command("send", _send, "send a message and show the outcome")
    send.add_argument("text", metavar="TEXT")
    send.add_argument("--data", metavar="JSON", help="add a data part holding this JSON value")
    source = send.add_mutually_exclusive_group()
    source.add_argument("--file", metavar="PATH", help="add the file's bytes as a part")
    source.add_argument("--url", help="add a part pointing at this URL")
    send.add_argument("--media-type", help="media type of --file/--url (default: guessed)")
    send.add_argument("--stream", action="store_true", help="stream events live")
    send.add_argument(
        "--task-id", help="continue this task (its context is the task's; --context-id may say it)"
    )
    send.add_argument("--context-id", help="the conversation's context id")
    send.add_argument(
        "--budget",
        metavar="AMOUNT",
        help="state a budget (budget extension), e.g. 0.10; the agent refuses work over it",
    )
    send.add_argument("--currency", help=f"currency of --budget (default: {DEFAULT_CURRENCY})")
    send.add_argument(
        "--sign-key",
        metavar="PEM",
        help="sign the message (signed-messages extension) with this Ed25519 or P-256 private "
        "key, e.g. from `a2a-grpc keys new`",
    )
    send.add_argument("--sign-kid", metavar="KID", help="the key id of --sign-key")
    send.add_argument(
        "--sign-card",
        metavar="URL",
        help="name the signer's agent card, which publishes --sign-kid: agents that trust that "
        "card verify with its keys",
    )
    send.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="TASK_ID",
        help="refer to an earlier task (refining a finished one)",
    )

    get = command("get", _get, "show a task")
    get.add_argument("id", metavar="TASK_ID")
    get.add_argument("--history", type=int, metavar="N", help="at most N history messages")

    listing = command("list", _list, "list tasks, newest first")
    listing.add_argument("--context-id")
    listing.add_argument("--state", help="only tasks in this state (e.g. working)")
    listing.add_argument("--page-size", type=int)
    listing.add_argument("--page-token", default="")

    cancel = command("cancel", _cancel, "cancel a task")
    cancel.add_argument("id", metavar="TASK_ID")

    subscribe = command("subscribe", _subscribe, "follow a running task live")
    subscribe.add_argument("id", metavar="TASK_ID")

    command(
        "card",
        _card,
        "show the agent card (URL: the public card; host:port: GetExtendedAgentCard, or the "
        "public card when the agent has no extended card for you)",
    )
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value
