"""Webhook delivery: each task's status and artifact updates POSTed to its webhooks.

Delivery contract:
- Every status and artifact update of a task is POSTed to each of its webhooks, in the version
  the webhook was registered in: to a 1.0 webhook as a ProtoJSON StreamResponse,
  `Content-Type: application/a2a+json`; to a 0.3 one (registered through the 0.3 service) as
  the task as it stands after the update, in A2A 0.3's JSON (`core.v03.task_json`),
  `Content-Type: application/json`, which is what the 0.3 SDKs' own senders POST and their
  receivers read. Both carry `Authorization: <scheme> <credentials>` from the config and
  `X-A2A-Notification-Token` when a token is set.
- In order per webhook: one worker per webhook sends one event at a time.
- At least once: a failed POST (connection error, timeout, non-2xx) is retried with exponential
  backoff; after `max_attempts` the webhook is given up (logged) and gets nothing more.
- Traced: each POST carries the W3C trace context the event was published in.
- Never blocking: events are queued (bounded; overflow gives the webhook up) and sent by
  background tasks, so a slow webhook never slows the task or its streams. Queuing an event costs
  one serialization plus one queue entry per webhook of the task (their number is capped, see
  `protocol.push_config_rpcs.PushConfigService`), and at most `max_connections` POSTs are in
  flight at once.
- Guarded: every attempt first passes the SSRF guard (`guard.WebhookGuard.check`), and the POST
  connects only to the addresses it allowed (`guard.PinnedTransport`). A refused target fails
  the delivery without a retry, and the webhook is given up.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
from google.protobuf import json_format

from a2a_grpc.core.failure_log import FailureLog
from a2a_grpc.core.states import TERMINAL_STATES
from a2a_grpc.core.tracing import outgoing_headers
from a2a_grpc.core.v03 import PROTOCOL_VERSION as V03
from a2a_grpc.core.v03 import task_json
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.push.configs import V10, PushConfigStore
from a2a_grpc.server.push.guard import (
    PinnedTransport,
    WebhookGuard,
    WebhookRefusedError,
    pinned_addresses,
)

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/a2a+json"
CONTENT_TYPE_V03 = "application/json"
"""What the 0.3 SDKs' senders (a2a-sdk 0.3 over httpx, a2a-go v0.3.3) send their task JSON as."""
TOKEN_HEADER = "X-A2A-Notification-Token"
MAX_RECEIVER_LOGS = 2048
"""Quiet logs of receivers (two per origin: attempts and give-ups) kept at once."""


@dataclass(frozen=True)
class DeliveryPolicy:
    timeout: float = 10.0
    """Seconds for one POST, connection included."""
    max_attempts: int = 6
    """Tries per event before the webhook is given up."""
    backoff: float = 0.5
    """First retry delay in seconds; doubles each attempt, capped at `max_backoff`."""
    max_backoff: float = 30.0
    queue_size: int = 1000
    """Undelivered events a webhook may accumulate before it is given up."""
    allow_private_targets: bool = False
    """Allow loopback / private / link-local targets (tests, trusted meshes)."""
    max_connections: int = 64
    """POSTs in flight at once over all webhooks (also the connection pool's size)."""


def _delivered_kind(event: a2a_pb2.StreamResponse) -> bool:
    """Webhooks get status and artifact updates (not the task snapshot or a direct reply)."""
    return event.WhichOneof("payload") in ("status_update", "artifact_update")


def _is_terminal(event: a2a_pb2.StreamResponse) -> bool:
    return (
        event.WhichOneof("payload") == "status_update"
        and event.status_update.status.state in TERMINAL_STATES
    )


@dataclass
class _Webhook:
    config: a2a_pb2.TaskPushNotificationConfig
    protocol: str = V10  # the version it was registered in, which its bodies are in
    # Each event with the trace context it was published in (W3C headers to send along), its
    # position in a shared store's event log and who records its delivery (None in one
    # process).
    queue: asyncio.Queue[tuple[bytes, list[tuple[str, str]], str | None, Delivered | None]] = field(
        default_factory=asyncio.Queue
    )
    worker: asyncio.Task[None] | None = None
    dead: bool = False
    finished: bool = False  # the task reached a terminal state: forget this webhook when drained


Delivered = Callable[[str, str, str], Awaitable[None]]
"""Awaited with (task id, config id, position) after an event with a position was delivered."""

Snapshot = Callable[[str], a2a_pb2.Task | None]
"""The task as it stands now, by id."""


class SnapshotObserver:
    """A broker's observer: `WebhookDispatcher.observe` with a `snapshot` of the task."""

    __slots__ = ("_dispatcher", "_snapshot")

    def __init__(self, dispatcher: WebhookDispatcher, snapshot: Snapshot) -> None:
        self._dispatcher = dispatcher
        self._snapshot = snapshot

    @property
    def watched(self) -> Container[str]:
        return self._dispatcher.watched

    def observe(self, task_id: str, event: a2a_pb2.StreamResponse) -> None:
        self._dispatcher.observe(task_id, event, snapshot=self._snapshot)


class WebhookDispatcher:
    """Observes a task's events (see `Broker`) and delivers them to the task's webhooks."""

    def __init__(
        self,
        configs: PushConfigStore,
        policy: DeliveryPolicy,
        *,
        guard: WebhookGuard | None = None,
        ssl_context: ssl.SSLContext | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`ssl_context` verifies https webhooks (default: the system's CAs)."""
        self.configs = configs
        self.policy = policy
        self.guard = guard or WebhookGuard(allow_private_targets=policy.allow_private_targets)
        self._ssl_context = ssl_context
        self._client: httpx.AsyncClient | None = None
        self._sleep = sleep
        self._slots = asyncio.Semaphore(policy.max_connections)
        # By task id, then config id: a task leaving the store drops its webhooks in one step.
        self._webhooks: dict[str, dict[str, _Webhook]] = {}
        self.delivered = 0
        """Events delivered (a 2xx answer), since start; `retries` and `given_up` likewise:
        POSTs tried again after a failed attempt, and webhooks given up."""
        self.retries = 0
        self.given_up = 0
        self.failures = 0
        """Failed POST attempts and refused targets, since start (each receiver's repeats are
        logged at most once a minute: `_receiver_log`)."""
        self._receivers: dict[tuple[str, bool], FailureLog] = {}

    @property
    def watched(self) -> Container[str]:
        """The tasks with webhooks (a live view, for the broker)."""
        return self.configs.watched

    def with_snapshot(self, snapshot: Snapshot) -> SnapshotObserver:
        """This dispatcher as a broker's observer that asks `snapshot` for the task as it
        stands (the memory store's table), the body of a 0.3 webhook."""
        return SnapshotObserver(self, snapshot)

    def observe(
        self,
        task_id: str,
        event: a2a_pb2.StreamResponse,
        position: str | None = None,
        task: a2a_pb2.Task | None = None,
        *,
        on_delivered: Delivered | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        """Queues a status or artifact update for every webhook of the task. Never waits.

        Costs one serialization per protocol version among the task's webhooks, plus a queue
        entry per webhook of the task (a capped number). `position`: the event's place in a
        shared store's log, awaited with `on_delivered` once the event reached a webhook (the
        store keeps the cursor, so another replica can go on from it). `task`: the task as the
        event left it, what a 0.3 webhook is sent (else `snapshot` is asked for it).
        """
        if not _delivered_kind(event):
            return
        body: bytes | None = None
        body_v03: bytes | None = None
        trace_headers: list[tuple[str, str]] | None = None
        configs = self.configs
        for config in configs.stored_for(task_id):
            if trace_headers is None:
                trace_headers = outgoing_headers()
            if configs.protocol(task_id, config.id) == V03:
                if body_v03 is None:
                    body_v03 = self._task_body(task_id, event, task, snapshot)
                terminal = _is_terminal(event)
                self._enqueue(config, body_v03, trace_headers, position, terminal, on_delivered)
                continue
            if body is None:
                body = json_format.MessageToJson(event, indent=None).encode()
            self._enqueue(config, body, trace_headers, position, _is_terminal(event), on_delivered)

    def replay(
        self,
        config: a2a_pb2.TaskPushNotificationConfig,
        events: list[tuple[str, bytes]],
        task: a2a_pb2.Task | None = None,
        *,
        on_delivered: Delivered | None = None,
    ) -> None:
        """Queues `events` ((position, serialized StreamResponse), oldest first) for one
        webhook: what another replica recorded but had not delivered when it stopped (each
        delivery awaits `on_delivered`, as in `observe`).

        A 0.3 webhook is sent the task, not the events, so it gets one POST of `task` (the task
        as it stands now) at the last event's position: every body the missed events would have
        made is an older state of the same task."""
        delivered = [
            (position, event)
            for position, event in (
                (position, a2a_pb2.StreamResponse.FromString(raw)) for position, raw in events
            )
            if _delivered_kind(event)
        ]
        if not delivered:
            return
        if self.configs.protocol(config.task_id, config.id) == V03:
            position, last = delivered[-1]
            terminal = any(_is_terminal(event) for _, event in delivered)
            body = self._task_body(config.task_id, last, task, None)
            self._enqueue(config, body, [], position, terminal, on_delivered)
            return
        for position, event in delivered:
            body = json_format.MessageToJson(event, indent=None).encode()
            self._enqueue(config, body, [], position, _is_terminal(event), on_delivered)

    def _task_body(
        self,
        task_id: str,
        event: a2a_pb2.StreamResponse,
        task: a2a_pb2.Task | None,
        snapshot: Snapshot | None,
    ) -> bytes:
        """The body of a 0.3 webhook: the task in A2A 0.3's JSON. Without the task (it left
        the store meanwhile), the one the event describes: its ids and its status."""
        if task is None and snapshot is not None:
            task = snapshot(task_id)
        if task is None:
            task = a2a_pb2.Task(id=task_id)
            if event.HasField("status_update"):
                task.context_id = event.status_update.context_id
                task.status.CopyFrom(event.status_update.status)
            else:
                task.context_id = event.artifact_update.context_id
                task.artifacts.append(event.artifact_update.artifact)
        return json.dumps(task_json(task), separators=(",", ":"), ensure_ascii=False).encode()

    def _enqueue(
        self,
        config: a2a_pb2.TaskPushNotificationConfig,
        body: bytes,
        trace_headers: list[tuple[str, str]],
        position: str | None,
        terminal: bool,
        on_delivered: Delivered | None,
    ) -> None:
        hooks = self._webhooks.setdefault(config.task_id, {})
        webhook = hooks.get(config.id)
        if webhook is None or webhook.config is not config:  # new, or replaced by Create
            if webhook is not None:
                webhook.dead = True  # the old URL gets nothing more
            protocol = self.configs.protocol(config.task_id, config.id)
            webhook = hooks[config.id] = _Webhook(config, protocol)
        if webhook.dead:
            return
        if webhook.queue.qsize() >= self.policy.queue_size:
            self._give_up(webhook, f"more than {self.policy.queue_size} events undelivered")
            return
        webhook.queue.put_nowait((body, trace_headers, position, on_delivered))
        webhook.finished = webhook.finished or terminal
        if webhook.worker is None or webhook.worker.done():
            webhook.worker = asyncio.get_running_loop().create_task(self._work(webhook))

    async def _work(self, webhook: _Webhook) -> None:
        while not webhook.queue.empty() and not webhook.dead:
            body, trace_headers, position, on_delivered = webhook.queue.get_nowait()
            try:
                delivered = await self._deliver(webhook, body, trace_headers)
            except Exception as exc:  # never let a delivery die silently
                log.exception("webhook %s: unexpected error while delivering", webhook.config.id)
                self._give_up(webhook, f"unexpected {type(exc).__name__}")
                break
            if not delivered:
                self._give_up(webhook, f"{self.policy.max_attempts} attempts failed")
            elif position is not None and on_delivered is not None:
                config = webhook.config
                try:
                    await on_delivered(config.task_id, config.id, position)
                except Exception:  # the cursor lags: a takeover re-sends (at least once)
                    log.warning("webhook %s: could not record the delivery", config.id)
        # A dead webhook stays listed, so later events do not revive it, until its task goes.
        if webhook.finished and not webhook.dead:
            self._drop(webhook.config.task_id, webhook.config.id, webhook)

    async def _deliver(
        self, webhook: _Webhook, body: bytes, trace_headers: list[tuple[str, str]]
    ) -> bool:
        config = webhook.config
        content_type = CONTENT_TYPE_V03 if webhook.protocol == V03 else CONTENT_TYPE
        headers = {"Content-Type": content_type, **dict(trace_headers)}
        if config.HasField("authentication") and config.authentication.scheme:
            credentials = config.authentication.credentials
            headers["Authorization"] = f"{config.authentication.scheme} {credentials}".strip()
        if config.token:
            headers[TOKEN_HEADER] = config.token
        delay = self.policy.backoff
        for attempt in range(1, self.policy.max_attempts + 1):
            try:
                async with self._slots:
                    # Checked again on every attempt (DNS changes); connects where it checked.
                    pinned = pinned_addresses.set(await self.guard.check(config.url))
                    try:
                        response = await self._http().post(
                            config.url, content=body, headers=headers, timeout=self.policy.timeout
                        )
                    finally:
                        pinned_addresses.reset(pinned)
                if 200 <= response.status_code < 300:
                    self.delivered += 1
                    self._receiver_log(config.url).recovered("answers again")
                    self._receiver_log(config.url, gave_up=True).recovered(None)
                    return True
                problem = f"HTTP {response.status_code}"
            except WebhookRefusedError as exc:
                self.failures += 1
                self._receiver_log(config.url).failed(f"refused webhook {config.id}: {exc}")
                return False
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            self.failures += 1
            self._receiver_log(config.url).failed(
                f"webhook {config.id} for task {config.task_id}: attempt {attempt} failed "
                f"({problem})"
            )
            if attempt < self.policy.max_attempts:
                self.retries += 1
                await self._sleep(delay)
                delay = min(delay * 2, self.policy.max_backoff)
        return False

    def _give_up(self, webhook: _Webhook, why: str) -> None:
        webhook.dead = True
        self.given_up += 1
        while not webhook.queue.empty():
            webhook.queue.get_nowait()
        config = webhook.config
        self._receiver_log(config.url, gave_up=True).failed(
            f"gave up webhook {config.id} for task {config.task_id}: {why}"
        )

    def _receiver_log(self, url: str, *, gave_up: bool = False) -> FailureLog:
        """The quiet log of one receiver (scheme, host and port of `url`), for its failed
        attempts or (`gave_up`) its webhooks given up: a receiver that is down for every task
        is one WARNING of each, then at most a line a minute of each, then one INFO line when
        it answers again. At most MAX_RECEIVER_LOGS are kept (the oldest goes)."""
        parts = urlsplit(url)
        key = (f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}", gave_up)
        receiver = self._receivers.get(key)
        if receiver is None:
            if len(self._receivers) >= MAX_RECEIVER_LOGS:
                del self._receivers[next(iter(self._receivers))]
            receiver = self._receivers[key] = FailureLog(log, f"webhook receiver {key[0]}")
        return receiver

    def forget_task(self, task_id: str) -> None:
        """The task left the store: drop its registrations and delivery state."""
        self.configs.drop_task(task_id)
        for webhook in self._webhooks.pop(task_id, {}).values():
            webhook.dead = True

    def forget(self, task_id: str, config_id: str) -> None:
        """A deleted config: stop delivering to it (its worker ends after the current POST)."""
        webhook = self._drop(task_id, config_id, None)
        if webhook is not None:
            webhook.dead = True

    def _drop(self, task_id: str, config_id: str, only: _Webhook | None) -> _Webhook | None:
        """Unlists a task's webhook (only if it is `only`, when given); returns what went."""
        hooks = self._webhooks.get(task_id)
        webhook = None if hooks is None else hooks.get(config_id)
        if webhook is None or (only is not None and webhook is not only):
            return None
        assert hooks is not None
        del hooks[config_id]
        if not hooks:
            del self._webhooks[task_id]
        return webhook

    def _busy(self) -> list[_Webhook]:
        """The webhooks whose worker is still running."""
        return [
            webhook
            for hooks in self._webhooks.values()
            for webhook in hooks.values()
            if webhook.worker is not None and not webhook.worker.done()
        ]

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # As many connections as POSTs may be in flight, so none waits for the pool.
            limits = httpx.Limits(max_connections=self.policy.max_connections)
            transport = PinnedTransport(limits, self._ssl_context)
            self._client = httpx.AsyncClient(transport=transport, follow_redirects=False)
        return self._client

    async def idle(self) -> None:
        """Waits until every queued event has been delivered or given up (tests, shutdown)."""
        while busy := self._busy():
            await asyncio.wait([webhook.worker for webhook in busy if webhook.worker])

    async def close(self, grace: float = 0.0) -> None:
        """Gives pending deliveries `grace` seconds, then stops them and closes the client.

        What a stopped worker had not delivered (the event it was sending and those queued
        behind it) is logged as undelivered.
        """
        busy = {webhook.worker: webhook for webhook in self._busy() if webhook.worker}
        if busy:
            _, pending = await asyncio.wait(busy, timeout=grace)
            for worker in pending:
                worker.cancel()
                webhook = busy[worker]
                log.warning(
                    "webhook %s (%s) for task %s: %d event(s) undelivered at shutdown",
                    webhook.config.id,
                    webhook.config.url,
                    webhook.config.task_id,
                    webhook.queue.qsize() + 1,
                )
            if pending:
                await asyncio.wait(pending)
        if self._client is not None:
            await self._client.aclose()
            self._client = None
