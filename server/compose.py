"""The composition root of the protocol core: builds the task store, the idempotency window,
the push-config service, the webhook dispatcher and the signature verifier for one server, and
the `RequestHandler` over them. Every collaborator is given to its constructor; nothing is
wired by assigning attributes afterwards.

The store is the kind `config.store`'s scheme names in the registry (tasks/registry.py: this
process's memory, a Redis shared by replicas, or one a package adds), or the one given. What a
store tells the server (a task evicted, a run's task canceled on another replica, its backend's
health) goes to the `StoreEvents` made for it first (`tasks.base.StoreListener`).
"""

from __future__ import annotations

from collections.abc import Callable

from a2a_grpc.core.jose import KeySet
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import AgentExecutor
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.protocol.dedup import window_for
from a2a_grpc.server.protocol.handler import RequestHandler
from a2a_grpc.server.protocol.push_config_rpcs import PushConfigService
from a2a_grpc.server.protocol.run import TaskRun
from a2a_grpc.server.push.configs import PushConfigStore
from a2a_grpc.server.push.delivery import WebhookDispatcher
from a2a_grpc.server.tasks.base import StoreFactory, StoreSettings, TaskStore
from a2a_grpc.server.tasks.registry import open_store
from a2a_grpc.server.trust.audit import AuditLog
from a2a_grpc.server.trust.signers import MessageVerifier, SignerCards

__all__ = ["StartupError", "StoreEvents", "build_handler", "store_settings"]


class StartupError(RuntimeError):
    """The server cannot start as configured; the message says why in one line."""


class StoreEvents:
    """The server's `StoreListener`: a task the store let go of drops its webhooks; a task a
    run here works on, canceled by a caller on another replica, stops its run; the backend's
    health goes to `on_health` (the health board)."""

    def __init__(
        self,
        runs: dict[str, TaskRun],
        *,
        webhooks: WebhookDispatcher | None = None,
        on_health: Callable[[bool], None] | None = None,
    ) -> None:
        self._runs = runs
        self._on_health = on_health
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


def _ignore(task_id: str) -> None:
    pass


def store_settings(config: ServerConfig) -> StoreSettings:
    """The settings of `config` that concern its task store."""
    return StoreSettings(
        max_tasks=config.max_tasks,
        max_bytes=config.max_store_bytes,
        max_live_per_owner=config.live_tasks_per_principal,
        max_live_per_tenant=config.live_tasks_per_tenant,
        terminal_ttl=config.task_ttl,
        lease=config.task_lease,
        queue_size=config.subscriber_queue_size,
        replay_length=config.replay_events,
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
) -> RequestHandler:
    """A handler over the store `config.store` names (tasks/registry.py: this process's memory
    by default), or over `store`: a store as it was built, or a `StoreFactory` given this
    server's settings, listener and webhooks. Nothing is opened: start the store with
    `handler.store.start()`.

    `webhooks` delivers push notifications when the card offers them (one is made from
    `config` when not given). With `signature_keys` or `signer_cards`, signed messages are
    verified (see `server/trust/signers.py`). `on_store_health` is told when the store's
    backend stops and starts answering again."""
    if card.capabilities.push_notifications:
        webhooks = webhooks or WebhookDispatcher(PushConfigStore(), config.delivery_policy)
    else:
        webhooks = None
    runs: dict[str, TaskRun] = {}
    listener = StoreEvents(runs, webhooks=webhooks, on_health=on_store_health)
    settings = store_settings(config)
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
        extended_card=extended_card,
    )
