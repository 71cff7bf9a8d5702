"""The console's back end: HTTP JSON routes and Server-Sent Events over one `A2AClient`.

The client is the one the other client commands open (`Connection`: TARGET, auth, TLS, tenant,
transport), opened on the first call that needs it and kept for the session; a failure to open
it is that call's error, and the next call tries again. Every call's failure is answered with
the client's classification (`views.error_view`), never a bare status.

Streams (a streamed send, a subscription) run in the back end whatever the page does: each is a
`StreamRun` that keeps its events; the page reads them with EventSource from
`/api/streams/{id}`, and a reconnect (Last-Event-ID) carries on where it stopped. At most
`MAX_STREAMS` are kept; the oldest finished one goes first.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import contextlib
import itertools
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from google.protobuf import json_format

from a2a_grpc.cli.console import card_checks, views
from a2a_grpc.client.card import card_url
from a2a_grpc.client.channel import ChannelOptions, TlsConfig
from a2a_grpc.client.cli import (
    DEFAULT_CURRENCY,
    NO_EXTENDED_CARD,
    PUBLIC_CARD_TIMEOUT_S,
    host_and_port,
    names_grpc_port,
)
from a2a_grpc.client.cli_connection import (
    Connection,
    UsageError,
    allowed_transports,
    credentials_from_args,
    is_url,
    tls_config,
)
from a2a_grpc.client.client import A2AClient
from a2a_grpc.client.errors import (
    A2AClientError,
    AgentCardError,
    DeadlineExceededError,
    UnavailableError,
)
from a2a_grpc.client.follow import StreamItem
from a2a_grpc.client.messages import data_part, file_part, url_part, user_message
from a2a_grpc.client.state_names import parse_state_name
from a2a_grpc.client.transports.http import create_http_client
from a2a_grpc.core.budget import BUDGET_EXTENSION, with_budget
from a2a_grpc.core.cards import DEFAULT_CARD_TIMEOUT_S, parse_card
from a2a_grpc.core.errors import StatusError
from a2a_grpc.core.metadata import EXTENSIONS_KEY
from a2a_grpc.core.release import version_line
from a2a_grpc.generated import a2a_pb2

STATIC = Path(__file__).resolve().parent / "static"
"""The page: plain HTML, CSS and JavaScript, no build step."""
DEFAULT_CALL_TIMEOUT_S = 30.0
"""A unary call's deadline when `--timeout` is not given: a call that hangs says so."""
MAX_STREAMS = 50


class Session:
    """The console's one client and its streams."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._connection: Connection | None = None
        self._client: A2AClient | None = None
        self._lock = asyncio.Lock()
        self.streams: dict[str, StreamRun] = {}

    async def client(self) -> A2AClient:
        async with self._lock:
            if self._client is None:
                connection = Connection(self.args)
                self._client = await connection.__aenter__()
                self._connection = connection
            return self._client

    @property
    def call_timeout(self) -> float:
        timeout: float | None = self.args.timeout
        return timeout if timeout is not None else DEFAULT_CALL_TIMEOUT_S

    def interface(self) -> a2a_pb2.AgentInterface | None:
        client = self._client
        if client is None:
            return None
        try:
            return client.interface
        except RuntimeError:
            return None

    def add_stream(self, run: StreamRun) -> None:
        if len(self.streams) >= MAX_STREAMS:
            for stream_id, old in list(self.streams.items()):
                if old.finished:
                    del self.streams[stream_id]
                    break
        self.streams[run.id] = run

    async def close(self) -> None:
        for run in self.streams.values():
            await run.stop()
        if self._connection is not None:
            await self._connection.__aexit__(None, None, None)
            self._connection = self._client = None


class StreamRun:
    """One stream read to its end in the back end; its events are kept for the page."""

    def __init__(self, kind: str, interface: a2a_pb2.AgentInterface | None) -> None:
        self.id = uuid.uuid4().hex
        self.kind = kind
        self.interface = interface
        self.items: list[dict[str, Any]] = []
        self.end: dict[str, Any] | None = None
        self._wake = asyncio.Event()
        self._started = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    @property
    def finished(self) -> bool:
        return self.end is not None

    def start(self, stream: AsyncGenerator[StreamItem, None]) -> None:
        self._task = asyncio.create_task(self._read(stream))

    async def _read(self, stream: AsyncGenerator[StreamItem, None]) -> None:
        try:
            async with contextlib.aclosing(stream):
                async for event, view in stream:
                    self._publish(event, view)
        except asyncio.CancelledError:
            self._finish({"outcome": "stopped"})
        except Exception as error:
            self._finish({"outcome": "error", "error": views.error_view(error)})
        else:
            self._finish({"outcome": "ended"})

    def _publish(self, event: a2a_pb2.StreamResponse, view: Any) -> None:
        item = {
            "seq": len(self.items),
            "ms": round((time.monotonic() - self._started) * 1000),
            **views.event_summary(event),
            "view": views.stream_view(view),
            "raw": views.wire_json(event, self.interface),
        }
        self.items.append(item)
        self._notify()

    def _finish(self, end: dict[str, Any]) -> None:
        end["ms"] = round((time.monotonic() - self._started) * 1000)
        self.end = end
        self._notify()

    def _notify(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    async def follow(self, start: int) -> AsyncIterator[dict[str, Any]]:
        """The events from index `start`, then live ones, until the stream ends."""
        index = start
        while True:
            while index < len(self.items):
                yield self.items[index]
                index += 1
            if self.end is not None:
                return
            await self._wake.wait()

    async def stop(self) -> None:
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


SESSION = web.AppKey("session", Session)
TOKEN = web.AppKey("token", str)


def routes(app: web.Application) -> None:
    app.router.add_get("/", index)
    app.router.add_static("/static/", STATIC, append_version=False)
    app.router.add_get("/api/session", session_info)
    app.router.add_get("/api/card", card)
    app.router.add_post("/api/send", send)
    app.router.add_post("/api/streams", open_stream)
    app.router.add_get("/api/streams/{id}", stream_events)
    app.router.add_delete("/api/streams/{id}", stop_stream)
    app.router.add_get("/api/tasks", list_tasks)
    app.router.add_get("/api/tasks/{id}", get_task)
    app.router.add_post("/api/tasks/{id}/cancel", cancel_task)
    app.router.add_get("/api/tasks/{id}/push-configs", list_push_configs)
    app.router.add_post("/api/tasks/{id}/push-configs", create_push_config)
    app.router.add_delete("/api/tasks/{id}/push-configs/{config}", delete_push_config)


# --- the page -----------------------------------------------------------------------------------


async def index(request: web.Request) -> web.Response:
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    # The page sends the token back in X-Console-Token (guard.py); it is the console's own
    # session token, never a credential of the agent's.
    page = page.replace("{{TOKEN}}", request.app[TOKEN])
    return web.Response(text=page, content_type="text/html")


async def session_info(request: web.Request) -> web.Response:
    session = request.app[SESSION]
    args = session.args
    interface = session.interface()
    return web.json_response(
        {
            "target": args.target,
            "transport": args.transport or "",
            "tenant": args.tenant or "",
            "version": version_line(),
            "interface": views.proto_json(interface) if interface is not None else None,
        }
    )


def _error(error: BaseException, status: int = 502) -> web.Response:
    return web.json_response({"error": views.error_view(error)}, status=status)


def _usage(message: str) -> web.Response:
    return web.json_response(
        {"error": {"category": "usage", "error": "UsageError", "message": message}}, status=400
    )


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError) as error:
        raise UsageError(f"the request body is not JSON: {error}") from error
    if not isinstance(body, dict):
        raise UsageError("the request body is a JSON object")
    return body


# --- the card -----------------------------------------------------------------------------------


async def card(request: web.Request) -> web.Response:
    """The card and its checks. A card URL is fetched as served; for a gRPC `host:port` the
    card is GetExtendedAgentCard's, or where the agent has none for this caller, the public
    card where an a2a-grpc server serves it (the gRPC port + 1, as `card host:port` looks),
    if it names this gRPC port."""
    session = request.app[SESSION]
    args = session.args
    try:
        tls = tls_config(args)
        if is_url(args.target):
            source = card_url(args.target)
            raw, agent_card = await _served_card(source, tls, args.timeout)
            document = card_checks.card_document(raw)
            checks = [card_checks.strict_parse(document)]
        else:
            client = await session.client()
            try:
                agent_card = await client.get_extended_agent_card(timeout=session.call_timeout)
            except NO_EXTENDED_CARD as refused:
                found = await _public_card(args.target, tls)
                if found is None:
                    return _error(refused)
                source, raw, agent_card = found
                source += f", the public card (GetExtendedAgentCard: {type(refused).__name__})"
                document = card_checks.card_document(raw)
                checks = [card_checks.strict_parse(document)]
            else:
                raw = json_format.MessageToJson(agent_card)
                document = json.loads(raw)
                source = f"GetExtendedAgentCard at {args.target}"
                checks = [
                    card_checks.Check(
                        "strict A2A 1.0 parse", "info", "the card came over gRPC, as protobuf"
                    )
                ]
        credentials = credentials_from_args(args)
    except UsageError as error:
        return _usage(str(error))
    except Exception as error:
        return _error(error)
    checks.append(card_checks.signature_check(agent_card, document))
    checks.append(card_checks.chosen_interface(agent_card, allowed_transports(args)))
    options = ChannelOptions(lb_policy=args.lb_policy)
    reach = await card_checks.reachability(
        agent_card, tls=tls, channel_options=options, credentials=credentials
    )
    return web.json_response(
        {
            "source": source,
            "card": views.proto_json(agent_card),
            "raw": raw,
            "checks": [check.json() for check in checks],
            "reachability": reach,
        }
    )


async def _served_card(
    url: str, tls: TlsConfig | None, timeout_s: float | None
) -> tuple[str, a2a_pb2.AgentCard]:
    """The card's JSON as served at `url`, and the card the client reads from it (leniently);
    AgentCardError for an HTTP error status."""
    async with create_http_client(tls) as http:
        try:
            response = await http.get(url, timeout=timeout_s or DEFAULT_CARD_TIMEOUT_S)
        except httpx.TimeoutException as error:
            raise DeadlineExceededError(f"GET {url}: {error!r}") from error
        except httpx.HTTPError as error:
            raise UnavailableError(f"GET {url}: {error!r}") from error
    if response.status_code != 200:
        raise AgentCardError(f"GET {url} answered HTTP {response.status_code}")
    return response.text, parse_card(response.text)


async def _public_card(
    target: str, tls: TlsConfig | None
) -> tuple[str, str, a2a_pb2.AgentCard] | None:
    """(url, JSON, card) of the public card an a2a-grpc server serves for the gRPC `target`,
    None when there is none that names this gRPC port."""
    host, port = host_and_port(target)
    if port is None:
        return None
    url = card_url(f"{'https' if tls is not None else 'http'}://{host}:{port + 1}")
    try:
        raw, agent_card = await _served_card(url, tls, PUBLIC_CARD_TIMEOUT_S)
    except (A2AClientError, StatusError):
        return None
    return (url, raw, agent_card) if names_grpc_port(agent_card, port) else None


# --- sending ------------------------------------------------------------------------------------


def _send_request(body: dict[str, Any]) -> a2a_pb2.SendMessageRequest:
    """SendMessage's request from the page's form; UsageError saying which field is wrong."""
    parts: list[a2a_pb2.Part | str] = []
    if body.get("text"):
        parts.append(str(body["text"]))
    if body.get("data"):
        try:
            parts.append(data_part(json.loads(body["data"])))
        except ValueError as error:
            raise UsageError(f"data is not valid JSON: {error}") from error
    file = body.get("file")
    if file:
        try:
            raw = base64.b64decode(file.get("base64", ""), validate=True)
        except (binascii.Error, ValueError) as error:
            raise UsageError(f"the file's bytes are not base64: {error}") from error
        parts.append(
            file_part(raw, filename=file.get("name", ""), media_type=file.get("mediaType", ""))
        )
    link = body.get("url")
    if link and link.get("url"):
        parts.append(url_part(link["url"], media_type=link.get("mediaType", "")))
    if not parts:
        raise UsageError("a message needs at least one part: text, data, a file or a URL")
    message = user_message(
        *parts, task_id=body.get("taskId") or "", context_id=body.get("contextId") or ""
    )
    extensions = [str(uri) for uri in body.get("extensions") or [] if uri]
    message.extensions.extend(uri for uri in extensions if uri not in message.extensions)
    if body.get("budget"):
        try:
            message = with_budget(
                message, str(body["budget"]), body.get("currency") or DEFAULT_CURRENCY
            )
        except (ValueError, ArithmeticError) as error:
            raise UsageError(f"budget {body['budget']!r}: {error}") from error
    request = a2a_pb2.SendMessageRequest(message=message)
    configuration = request.configuration
    configuration.return_immediately = bool(body.get("returnImmediately"))
    configuration.accepted_output_modes.extend(
        str(mode) for mode in body.get("acceptedOutputModes") or [] if mode
    )
    history = body.get("historyLength")
    if history not in (None, ""):
        try:
            configuration.history_length = int(history)
        except (TypeError, ValueError) as error:
            raise UsageError(f"history length {history!r} is not a whole number") from error
    return request


def _extension_metadata(
    args: argparse.Namespace, request: a2a_pb2.SendMessageRequest
) -> tuple[tuple[str, str], ...]:
    """The call's `a2a-extensions`: the command's, and the ones this message activates (its
    own list, the budget's), so that the agent applies them."""
    wanted = list(args.extension)
    if getattr(args, "budget", None) is not None:
        wanted.append(BUDGET_EXTENSION)
    extra = [uri for uri in request.message.extensions if uri not in wanted]
    if not extra:
        return ()
    return ((EXTENSIONS_KEY, ",".join(dict.fromkeys(wanted + extra))),)


async def send(request: web.Request) -> web.Response:
    session = request.app[SESSION]
    try:
        send_request = _send_request(await _body(request))
    except UsageError as error:
        return _usage(str(error))
    try:
        client = await session.client()
        result = await client.send_message(
            send_request,
            timeout=session.call_timeout,
            metadata=_extension_metadata(session.args, send_request),
        )
    except UsageError as error:
        return _usage(str(error))
    except Exception as error:
        return _error(error)
    if isinstance(result, a2a_pb2.Message):
        response = a2a_pb2.SendMessageResponse(message=result)
        shown: dict[str, Any] = {"message": views.message_view(result)}
    else:
        response = a2a_pb2.SendMessageResponse(task=result)
        shown = {"task": views.task_view(result)}
    return web.json_response({**shown, "raw": views.proto_json(response)})


async def open_stream(request: web.Request) -> web.Response:
    """A streamed send (the send form's fields) or, with `subscribe`, a subscription to that
    task (with `after`, resumed after that event id)."""
    session = request.app[SESSION]
    try:
        body = await _body(request)
        client = await session.client()
        if body.get("subscribe"):
            after = body.get("after") or None
            stream = client.subscribe_to_task(
                str(body["subscribe"]), timeout=session.args.timeout, after=after
            )
            kind = "resume" if after else "subscribe"
        else:
            send_request = _send_request(body)
            stream = client.send_streaming_message(
                send_request,
                timeout=session.args.timeout,
                metadata=_extension_metadata(session.args, send_request),
            )
            kind = "send"
    except UsageError as error:
        return _usage(str(error))
    except Exception as error:
        return _error(error)
    run = StreamRun(kind, session.interface())
    session.add_stream(run)
    run.start(stream)
    return web.json_response({"streamId": run.id, "kind": kind})


async def stream_events(request: web.Request) -> web.StreamResponse:
    """The stream as Server-Sent Events: `item` per event (its id the event's index), then one
    `end` saying how it ended (ended, stopped, or the error)."""
    run = request.app[SESSION].streams.get(request.match_info["id"])
    if run is None:
        return _usage("no such stream (the console keeps the last 50)")
    try:
        start = int(request.headers.get("Last-Event-ID", "-1")) + 1
    except ValueError:
        start = 0
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    try:
        async for item in run.follow(start):
            data = json.dumps(item, separators=(",", ":"))
            await response.write(f"id: {item['seq']}\nevent: item\ndata: {data}\n\n".encode())
        end = json.dumps(run.end, separators=(",", ":"))
        await response.write(f"event: end\ndata: {end}\n\n".encode())
        await response.write_eof()
    except ConnectionResetError:  # the page went away; the stream itself runs on
        pass
    return response


async def stop_stream(request: web.Request) -> web.Response:
    run = request.app[SESSION].streams.get(request.match_info["id"])
    if run is None:
        return _usage("no such stream")
    await run.stop()
    return web.json_response({"stopped": True})


# --- tasks --------------------------------------------------------------------------------------


async def list_tasks(request: web.Request) -> web.Response:
    session = request.app[SESSION]
    query = request.query
    listing = a2a_pb2.ListTasksRequest(
        context_id=query.get("contextId", ""), page_token=query.get("pageToken", "")
    )
    try:
        if query.get("state"):
            state = parse_state_name(query["state"])
            if state == a2a_pb2.TASK_STATE_UNSPECIFIED:
                raise ValueError(query["state"])
            listing.status = state
        if query.get("pageSize"):
            listing.page_size = int(query["pageSize"])
    except ValueError as error:
        return _usage(f"bad filter: {error}")
    try:
        client = await session.client()
        response = await client.list_tasks(listing, timeout=session.call_timeout)
    except UsageError as error:
        return _usage(str(error))
    except Exception as error:
        return _error(error)
    return web.json_response(
        {
            "tasks": [views.task_view(task, history=False) for task in response.tasks],
            "nextPageToken": response.next_page_token,
            "pageSize": response.page_size,
            "totalSize": response.total_size,
        }
    )


async def get_task(request: web.Request) -> web.Response:
    session = request.app[SESSION]
    getting = a2a_pb2.GetTaskRequest(id=request.match_info["id"])
    if request.query.get("historyLength"):
        try:
            getting.history_length = int(request.query["historyLength"])
        except ValueError:
            return _usage("historyLength is a whole number")
    try:
        client = await session.client()
        task = await client.get_task(getting, timeout=session.call_timeout)
    except UsageError as error:
        return _usage(str(error))
    except Exception as error:
        return _error(error)
    return web.json_response({"task": views.task_view(task), "raw": views.proto_json(task)})


async def cancel_task(request: web.Request) -> web.Response:
    session = request.app[SESSION]
    try:
        client = await session.client()
        task = await client.cancel_task(request.match_info["id"], timeout=session.call_timeout)
    except UsageError as error:
        return _usage(str(error))
    except Exception as error:
        return _error(error)
    return web.json_response({"task": views.task_view(task), "raw": views.proto_json(task)})


async def list_push_configs(request: web.Request) -> web.Response:
    session = request.app[SESSION]
    listing = a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=request.match_info["id"])
    configs: list[dict[str, Any]] = []
    try:
        client = await session.client()
        for _ in itertools.count():  # every page
            response = await client.list_task_push_notification_configs(
                listing, timeout=session.call_timeout
            )
            configs += [views.push_config_view(config) for config in response.configs]
            if not response.next_page_token or len(configs) > 1000:
                break
            listing.page_token = response.next_page_token
    except UsageError as error:
        return _usage(str(error))
    except Exception as error:
        return _error(error)
    return web.json_response({"configs": configs})


async def create_push_config(request: web.Request) -> web.Response:
    session = request.app[SESSION]
    try:
        body = await _body(request)
        if not body.get("url"):
            raise UsageError("a push config needs the URL the agent posts to")
        config = a2a_pb2.TaskPushNotificationConfig(
            task_id=request.match_info["id"],
            id=str(body.get("id") or ""),
            url=str(body["url"]),
            token=str(body.get("token") or ""),
        )
        if body.get("scheme"):
            config.authentication.scheme = str(body["scheme"])
            config.authentication.credentials = str(body.get("credentials") or "")
        client = await session.client()
        created = await client.create_task_push_notification_config(
            config, timeout=session.call_timeout
        )
    except UsageError as error:
        return _usage(str(error))
    except Exception as error:
        return _error(error)
    return web.json_response({"config": views.push_config_view(created)})


async def delete_push_config(request: web.Request) -> web.Response:
    session = request.app[SESSION]
    deleting = a2a_pb2.DeleteTaskPushNotificationConfigRequest(
        task_id=request.match_info["id"], id=request.match_info["config"]
    )
    try:
        client = await session.client()
        await client.delete_task_push_notification_config(deleting, timeout=session.call_timeout)
    except UsageError as error:
        return _usage(str(error))
    except Exception as error:
        return _error(error)
    return web.json_response({"deleted": True})
