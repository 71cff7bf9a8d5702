"""The composition root: builds what one server is made of besides its ports and transports,
opens it, and closes it. Every collaborator is given to its constructor; nothing is wired by
assigning attributes afterwards.

`build_handler` builds the `RequestHandler` over the task store, the idempotency window, the
push-config service, the webhook dispatcher and the signature verifier, and opens nothing.
`ServerRoot` is what `start_server` (app.py) uses: it opens, in this order,

1. the JWT authenticator's keys (`start_jwt`), when bearer JWTs are accepted;
2. the audit trail (`open_audit`);
3. then, once app.py has bound the ports (the card names them), `open_handler`: the signature
   verifier (its signer-card fetches), the task store (opened by `config.store`'s scheme from
   the registry, tasks/registry.py, or the `ServerPlan.store` given, and started), the webhook
   dispatcher (its deliveries record their progress in the store, so it closes before it),
   and the housekeeper (the handler's sweeps);

and `close` closes what it opened, in reverse order: nothing is closed by a module that did not
open it. app.py wires the transports onto the handler, and at stop asks the root to drain the
runs (`drain`) and then to close.

The store is the kind the URL's scheme names (memory, Redis, or one a package adds). What a
store tells the server (a task evicted, a run's task canceled on another replica, its backend's
health) goes to the `StoreEvents` made for it first (`tasks.base.StoreListener`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from a2a_grpc.core.audit_chain import NotAChainError
from a2a_grpc.core.jose import KeySet
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import AgentExecutor
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol.dedup import window_for
from a2a_grpc.server.protocol.handler import RequestHandler
from a2a_grpc.server.protocol.push_config_rpcs import PushConfigService
from a2a_grpc.server.protocol.run import TaskRun
from a2a_grpc.server.protocol.unrecorded import UnrecordedEnds
from a2a_grpc.server.push.configs import PushConfigStore
from a2a_grpc.server.push.delivery import WebhookDispatcher
from a2a_grpc.server.tasks.base import (
    StoreFactory,
    StoreSettings,
    StoreUnavailableError,
    TaskStore,
)
from a2a_grpc.server.tasks.registry import open_store, redacted_url
from a2a_grpc.server.tasks.sealing import CredentialKeys
from a2a_grpc.server.trust.audit import AuditLog
from a2a_grpc.server.trust.oidc import JwtBearer
from a2a_grpc.server.trust.signers import MessageVerifier, SignerCards

__all__ = ["ServerRoot", "StartupError", "StoreEvents", "build_handler", "store_settings"]

log = logging.getLogger(__name__)

Closer = Callable[[float], Awaitable[None]]
"""Closes one opened part, given the seconds left of the shutdown grace."""


class StartupError(RuntimeError):
    """The server cannot start as configured; the message says why in one line."""


class StoreEvents:
    """The server's `StoreListener`: a task the store let go of drops its webhooks; a task a
    run here works on, canceled by a caller on another replica, stops its run; the backend's
    health goes to `on_health` (the health board), and once it answers again the ends of runs
    it could not write meanwhile are written (`unrecorded`)."""

    def __init__(
        self,
        runs: dict[str, TaskRun],
        *,
        webhooks: WebhookDispatcher | None = None,
        on_health: Callable[[bool], None] | None = None,
        unrecorded: UnrecordedEnds | None = None,
    ) -> None:
        self._runs = runs
        self._on_health = on_health
        self._unrecorded = unrecorded
        # The dispatcher's own method, with no call in between: a full store evicts a task
        # per new one.
        self.task_evicted: Callable[[str], None] = (
            _ignore if webhooks is None else webhooks.forget_task
        )

    def canceled_elsewhere(self, task_id: str) -> None:
        run = self._runs.get(task_id)
        if run is not None:
            run.abort(a2a_pb2.TASK_STATE_CANCELED)

    def health_changed(self, healthy: bool) -> None:
        if self._on_health is not None:
            self._on_health(healthy)
        if healthy and self._unrecorded is not None:
            self._unrecorded.store_recovered()


def _ignore(task_id: str) -> None:
    pass


def store_settings(
    config: ServerConfig, push_credentials: CredentialKeys | None = None
) -> StoreSettings:
    """The settings of `config` that concern its task store, with the keys push configs'
    secrets are sealed with (None: stored as written)."""
    return StoreSettings(
        max_tasks=config.max_tasks,
        max_bytes=config.max_store_bytes,
        max_live_per_owner=config.live_tasks_per_principal,
        max_live_per_tenant=config.live_tasks_per_tenant,
        terminal_ttl=config.task_ttl,
        lease=config.task_lease,
        queue_size=config.subscriber_queue_size,
        replay_length=config.replay_events,
        push_credentials=push_credentials,
    )


def build_handler(
    agent: AgentExecutor,
    card: a2a_pb2.AgentCard,
    config: ServerConfig,
    *,
    store: TaskStore | StoreFactory | None = None,
    audit: AuditLog | None = None,
    on_store_health: Callable[[bool], None] | None = None,
    extended_card: a2a_pb2.AgentCard | None = None,
    webhooks: WebhookDispatcher | None = None,
    signature_keys: KeySet | None = None,
    signer_cards: SignerCards | None = None,
    push_credentials: CredentialKeys | None = None,
) -> RequestHandler:
    """A handler over the store `config.store` names (tasks/registry.py: this process's memory
    by default), or over `store`: a store as it was built, or a `StoreFactory` given this
    server's settings, listener and webhooks. Nothing is opened: start the store with
    `handler.store.start()` (`ServerRoot.open_handler` does, and closes it).

    `webhooks` delivers push notifications when the card offers them (one is made from
    `config` when not given). With `signature_keys` or `signer_cards`, signed messages are
    verified (see `server/trust/signers.py`). `on_store_health` is told when the store's
    backend stops and starts answering again. `push_credentials` seal push configs' secrets in
    a store that keeps them where others can read them (`StoreSettings.push_credentials`)."""
    if card.capabilities.push_notifications:
        webhooks = webhooks or WebhookDispatcher(PushConfigStore(), config.delivery_policy)
    else:
        webhooks = None
    runs: dict[str, TaskRun] = {}
    unrecorded = UnrecordedEnds()
    listener = StoreEvents(
        runs, webhooks=webhooks, on_health=on_store_health, unrecorded=unrecorded
    )
    settings = store_settings(config, push_credentials)
    if store is None:
        store = open_store(config.store, settings, listener, webhooks)
    elif callable(store):
        store = store(settings, listener, webhooks)
    push = None
    if webhooks is not None:
        push = PushConfigService(
            store, webhooks, max_per_task=config.max_push_configs, configs=store.push_configs
        )
    dedup = window_for(store.claims, window=config.dedup_window, capacity=config.max_tasks)
    verifier = None
    if signature_keys is not None or signer_cards is not None:
        verifier = MessageVerifier(
            signature_keys, signer_cards, required=config.require_signed_messages
        )
    return RequestHandler(
        agent,
        card,
        config,
        store=store,
        dedup=dedup,
        push=push,
        audit=audit,
        verifier=verifier,
        runs=runs,
        unrecorded=unrecorded,
        extended_card=extended_card,
    )


class ServerRoot:
    """What one server opened besides its ports, closed in reverse order of opening (see the
    module docstring). Each `open_*` / `start_*` method registers what it opened before it
    can fail, so that `close` also closes what a failed start left half open."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._opened: list[tuple[str, Closer]] = []
        self._handler: RequestHandler | None = None
        self.closed = False
        """True once `close` ran; the root opens nothing afterwards."""

    @property
    def handler(self) -> RequestHandler:
        """The handler `open_handler` built (RuntimeError before)."""
        if self._handler is None:
            raise RuntimeError("the handler is not built yet: call open_handler first")
        return self._handler

    def _opened_now(self, name: str, close: Closer) -> None:
        if self.closed:
            raise RuntimeError(f"the server root is closed: {name} cannot be opened")
        self._opened.append((name, close))

    async def start_jwt(self, jwt: JwtBearer) -> None:
        """Fetches the keys `jwt` checks bearer JWTs with and keeps them fresh; StartupError
        when they cannot be had."""

        async def close(grace: float) -> None:
            await jwt.aclose()

        self._opened_now("the JWT keys", close)
        try:
            await jwt.start()
        except ValueError as exc:
            raise StartupError(f"cannot check JWTs: {exc}") from exc

    def open_audit(self, on_health: Callable[[bool], None]) -> AuditLog | None:
        """The audit trail `config.audit_log` names, opened for appending (None without one);
        StartupError when it cannot be."""
        config = self.config
        if config.audit_log is None:
            return None
        try:
            audit = AuditLog(
                config.audit_log, fail_closed=config.audit_fail_closed, on_health=on_health
            )
        except OSError as exc:
            raise StartupError(
                f"cannot append to the audit log {config.audit_log}: {exc.strerror or exc}"
            ) from exc
        except NotAChainError as exc:
            raise StartupError(f"--audit-log: {exc}") from exc

        async def close(grace: float) -> None:
            await asyncio.to_thread(audit.close)

        self._opened_now("the audit trail", close)
        return audit

    async def open_handler(
        self,
        agent: AgentExecutor,
        card: a2a_pb2.AgentCard,
        *,
        store: TaskStore | StoreFactory | None = None,
        audit: AuditLog | None = None,
        on_store_health: Callable[[bool], None] | None = None,
        extended_card: a2a_pb2.AgentCard | None = None,
        webhooks: WebhookDispatcher | None = None,
        signature_keys: KeySet | None = None,
        signer_card_keys: KeySet | None = None,
        push_credentials: CredentialKeys | None = None,
    ) -> RequestHandler:
        """`build_handler`, then opens its parts: the verifier, the store (started:
        StartupError when its backend does not answer, or what answers is not what its URL
        names), the webhook dispatcher and the housekeeper. A store or a dispatcher given here
        is the root's from now on: `close` closes it."""
        config = self.config
        signer_cards = None
        if config.trusted_signer_cards:
            signer_cards = SignerCards(
                config.trusted_signer_cards,
                timeout_s=config.signer_card_timeout,
                card_keys=signer_card_keys,
            )
        handler = build_handler(
            agent,
            card,
            config,
            store=store,
            audit=audit,
            on_store_health=on_store_health,
            extended_card=extended_card,
            webhooks=webhooks,
            signature_keys=signature_keys,
            signer_cards=signer_cards,
            push_credentials=push_credentials,
        )
        self._handler = handler
        verifier, opened_store, dispatcher = handler.verifier, handler.store, handler.webhooks
        if verifier is not None:

            async def close_verifier(grace: float) -> None:
                await verifier.aclose()

            self._opened_now("the signature verifier", close_verifier)

        unrecorded = handler.intake.unrecorded

        async def close_store(grace: float) -> None:
            await unrecorded.close()  # what it has not written is the lease failover's
            await opened_store.close()

        self._opened_now("the task store", close_store)
        where = f" at {redacted_url(config.store)}" if store is None else ""
        try:
            await opened_store.start()
        except StoreUnavailableError as exc:
            raise StartupError(f"cannot reach the task store{where}: {exc}") from exc
        except ValueError as exc:
            raise StartupError(f"cannot use the task store{where}: {exc}") from exc
        if dispatcher is not None:

            async def close_webhooks(grace: float) -> None:
                # Pending POSTs get what is left of the grace; what they could not send is
                # logged as undelivered.
                await dispatcher.close(grace)

            self._opened_now("the webhook dispatcher", close_webhooks)
        housekeeping = handler.housekeeping

        async def stop_housekeeping(grace: float) -> None:
            await housekeeping.drain(grace)  # after `drain`: only the sweeps are left to stop

        self._opened_now("the housekeeper", stop_housekeeping)
        housekeeping.start()
        return handler

    async def drain(self, grace: float) -> None:
        """Lets the runs finish within `grace` seconds, then cancels them (the handler's
        `housekeeping.drain`, which also stops the sweeps); nothing when no handler was built."""
        if self._handler is not None:
            await self._handler.housekeeping.drain(grace)

    async def close(self, grace: float = 0.0) -> None:
        """Closes everything opened, last opened first, within what is left of `grace` seconds
        (the webhook dispatcher's pending POSTs use it). A part that fails to close is logged,
        and the others are closed all the same. Calling it again does nothing."""
        if self.closed:
            return
        self.closed = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self._opened:
            name, close = self._opened.pop()
            try:
                await close(max(0.0, deadline - loop.time()))
            except Exception:
                log.exception("closing %s failed", name)
