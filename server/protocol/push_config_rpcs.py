"""The four push-notification-config RPCs, scoped like every task operation.

Credentials are write-only: every config these RPCs return (Create's answer, Get, List) has
`authentication.credentials` emptied (`redacted`), following the spec's direction (A2A issue
#1681, whose proposed text says Get and List MUST omit or empty it, and the push-config epic
#1988). Only the stored copy, which delivery reads, keeps them.
"""

from __future__ import annotations

import asyncio
import logging
import string

from google.protobuf import empty_pb2

from a2a_grpc.core.errors import (
    FieldViolation,
    InternalError,
    InvalidParamsError,
    TaskNotFoundError,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.protocol.validation import raise_violations
from a2a_grpc.server.push.configs import V10, PushConfigStore
from a2a_grpc.server.push.delivery import WebhookDispatcher
from a2a_grpc.server.push.guard import WebhookRefusedError
from a2a_grpc.server.tasks.base import PushConfigs, Scope, TaskStore
from a2a_grpc.server.tasks.sealing import UnreadableCredentialsError

log = logging.getLogger(__name__)

CONFIGS_PAGE_SIZE = 100
"""Push configs per ListTaskPushNotificationConfigs page when the request sets none."""
DEFAULT_MAX_PER_TASK = 16


class LocalPushConfigs:
    """`PushConfigs` (tasks/base.py) over the dispatcher's own PushConfigStore (one process):
    where configs are kept when the store keeps none (`TaskStore.push_configs` is None)."""

    def __init__(self, configs: PushConfigStore) -> None:
        self.configs = configs

    async def put(
        self, config: a2a_pb2.TaskPushNotificationConfig, protocol: str = V10
    ) -> a2a_pb2.TaskPushNotificationConfig:
        return self.configs.put(config, protocol)

    async def protocols(self, task_id: str) -> dict[str, str]:
        return self.configs.protocols(task_id)

    async def count(self, task_id: str) -> int:
        return self.configs.count(task_id)

    async def has(self, task_id: str, config_id: str) -> bool:
        return self.configs.has(task_id, config_id)

    async def get(self, task_id: str, config_id: str) -> a2a_pb2.TaskPushNotificationConfig | None:
        return self.configs.get(task_id, config_id)

    async def for_task(self, task_id: str) -> list[a2a_pb2.TaskPushNotificationConfig]:
        return self.configs.for_task(task_id)

    async def delete(self, task_id: str, config_id: str) -> None:
        self.configs.delete(task_id, config_id)

    async def drop_task(self, task_id: str) -> None:
        self.configs.drop_task(task_id)


class PushConfigService:
    """Create / Get / List / Delete of webhooks; tasks are looked up in the caller's scope.

    A config lives until it is deleted or its task leaves the task store. Create keeps a
    caller-chosen `id` (replacing a config with the same id) and mints one otherwise. A task has
    at most `max_per_task` configs, which bounds the work each of its events causes. A config
    is registered in the protocol version of the call that made it (`protocol`: "1.0", or
    "0.3" through the 0.3 service), which its webhook's bodies follow; replacing it takes the
    replacing call's version. Reads show the config the same in every version, with its
    `authentication.credentials` empty (`redacted`): the caller wrote them, nobody reads them
    back; a replacement must give them again.
    """

    def __init__(
        self,
        store: TaskStore,
        dispatcher: WebhookDispatcher,
        *,
        max_per_task: int = DEFAULT_MAX_PER_TASK,
        configs: PushConfigs | None = None,
    ) -> None:
        """`configs`: where configs are kept, the store's `push_configs` (default, None: the
        dispatcher's, in this process)."""
        self.store = store
        self.dispatcher = dispatcher
        self.configs: PushConfigs = configs or LocalPushConfigs(dispatcher.configs)
        self.max_per_task = max_per_task
        self._dropping: set[asyncio.Task[None]] = set()

    async def validate(self, config: a2a_pb2.TaskPushNotificationConfig, path: str) -> None:
        """InvalidParams naming the field unless the config can be delivered as given.

        The url is required and must pass the SSRF guard (which checks its form too); the token,
        scheme and credentials become HTTP headers, so they must be valid header values.
        """
        violations = []
        if not config.url:
            violations.append(FieldViolation(f"{path}.url", "required: the webhook URL"))
        violations += _header_problems(f"{path}.token", config.token)
        if config.HasField("authentication"):
            auth = config.authentication
            if not auth.scheme:
                violations.append(
                    FieldViolation(f"{path}.authentication.scheme", "required, e.g. Bearer")
                )
            elif not set(auth.scheme) <= _TOKEN_CHARS:
                violations.append(
                    FieldViolation(
                        f"{path}.authentication.scheme",
                        "must be an HTTP authentication scheme name, e.g. Bearer",
                    )
                )
            violations += _header_problems(f"{path}.authentication.credentials", auth.credentials)
        raise_violations(violations)
        try:
            await self.dispatcher.guard.check(config.url)
        except WebhookRefusedError as exc:
            raise InvalidParamsError(
                str(exc), field_violations=[FieldViolation(f"{path}.url", str(exc))]
            ) from None

    async def check_room(self, task_id: str, config_id: str, field: str) -> None:
        """InvalidParams (naming `field`) when the task cannot take one more config.

        Replacing a config (same id) always fits. The cap is a permanent limit, so this is not
        RESOURCE_EXHAUSTED, which says that the same request may succeed later (our client
        retries it): only a change by the caller helps (delete a config, or reuse an id), and
        INVALID_PARAMS with a field violation says so and is never retried.
        """
        if await self.configs.count(task_id) < self.max_per_task:
            return
        if await self.configs.has(task_id, config_id):
            return
        problem = (
            f"task {task_id} already has {self.max_per_task} push notification configs, the most "
            "this server keeps per task: delete one, or give the id of one to replace it"
        )
        raise InvalidParamsError(problem, field_violations=[FieldViolation(field, problem)])

    async def register(
        self,
        config: a2a_pb2.TaskPushNotificationConfig,
        task_id: str,
        tenant: str,
        protocol: str = V10,
    ) -> a2a_pb2.TaskPushNotificationConfig:
        """Stores an already validated config for `task_id` (also used for inline configs),
        registered in `protocol`."""
        stored = a2a_pb2.TaskPushNotificationConfig()
        stored.CopyFrom(config)
        stored.task_id = task_id
        stored.tenant = tenant
        return await self.configs.put(stored, protocol)

    async def create(
        self, request: a2a_pb2.TaskPushNotificationConfig, scope: Scope, protocol: str = V10
    ) -> a2a_pb2.TaskPushNotificationConfig:
        _require_task_id(request.task_id, "task_id")
        await self.validate(request, "config")
        await self._task(request.task_id, scope)
        await self.check_room(request.task_id, request.id, "task_id")
        return redacted(await self.register(request, request.task_id, scope.tenant, protocol))

    async def get(
        self, request: a2a_pb2.GetTaskPushNotificationConfigRequest, scope: Scope
    ) -> a2a_pb2.TaskPushNotificationConfig:
        _require_ids(request.task_id, request.id)
        await self._task(request.task_id, scope)
        try:
            config = await self.configs.get(request.task_id, request.id)
        except UnreadableCredentialsError as exc:
            raise _unreadable(exc) from None
        if config is None:
            raise TaskNotFoundError(
                f"task {request.task_id} has no push notification config {request.id!r}",
                metadata={"taskId": request.task_id, "configId": request.id},
            )
        return redacted(config)

    async def list(
        self, request: a2a_pb2.ListTaskPushNotificationConfigsRequest, scope: Scope
    ) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        _require_task_id(request.task_id, "task_id")
        if request.page_size < 0:
            raise_violations([FieldViolation("page_size", "must not be negative")])
        await self._task(request.task_id, scope)
        try:
            configs = await self.configs.for_task(request.task_id)
        except UnreadableCredentialsError as exc:
            raise _unreadable(exc) from None
        start = _offset(request.page_token, len(configs))
        size = request.page_size or CONFIGS_PAGE_SIZE
        page = [redacted(config) for config in configs[start : start + size]]
        more = start + size < len(configs)
        return a2a_pb2.ListTaskPushNotificationConfigsResponse(
            configs=page, next_page_token=str(start + size) if more else ""
        )

    async def delete(
        self, request: a2a_pb2.DeleteTaskPushNotificationConfigRequest, scope: Scope
    ) -> empty_pb2.Empty:
        _require_ids(request.task_id, request.id)
        await self._task(request.task_id, scope)
        await self.configs.delete(request.task_id, request.id)
        self.dispatcher.forget(request.task_id, request.id)
        return empty_pb2.Empty()

    def forget_task(self, task_id: str) -> None:
        """Drops the task's configs (e.g. a direct reply made no task to watch), in the
        background when they are kept elsewhere."""
        dropping = asyncio.get_running_loop().create_task(self.configs.drop_task(task_id))
        self._dropping.add(dropping)
        dropping.add_done_callback(self._dropping.discard)

    async def _task(self, task_id: str, scope: Scope) -> None:
        if await self.store.get(task_id, scope, history_length=0) is None:
            raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})


def redacted(config: a2a_pb2.TaskPushNotificationConfig) -> a2a_pb2.TaskPushNotificationConfig:
    """`config` (a copy of the stored one: changed in place) as callers read it: the webhook's
    `authentication.credentials` emptied, its scheme kept, so a reader sees that the webhook
    authenticates and how, never with what. The `token` stays: it is the caller's own value
    for checking that a notification comes from this server, not a secret of the webhook."""
    if config.HasField("authentication"):
        config.authentication.credentials = ""
    return config


def _unreadable(exc: UnreadableCredentialsError) -> InternalError:
    """The answer to a Get or List that met a stored config whose secrets the server cannot
    open (tasks/sealing.py): INTERNAL, naming the config to replace, never its sealed text;
    the operator's side is logged."""
    log.warning("%s", exc)
    return InternalError(
        f"push notification config {exc.config_id!r} of task {exc.task_id} cannot be read "
        "by this server (its secrets were sealed with a key the server no longer has): "
        "create it again with the same id to replace it, or delete it",
        metadata={"taskId": exc.task_id, "configId": exc.config_id},
    )


def _require_task_id(task_id: str, path: str) -> None:
    if not task_id:
        raise_violations([FieldViolation(path, "required: the task id")])


def _require_ids(task_id: str, config_id: str) -> None:
    violations = []
    if not task_id:
        violations.append(FieldViolation("task_id", "required: the task id"))
    if not config_id:
        violations.append(FieldViolation("id", "required: the config id"))
    raise_violations(violations)


_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~")
"""The characters of an HTTP token (RFC 9110), such as an authentication scheme."""


def _header_problems(field: str, value: str) -> list[FieldViolation]:
    """Why `value` cannot be sent as an HTTP header value (none when it can)."""
    if not (value.isascii() and value.isprintable()):
        problem = "must be printable ASCII without control characters (it is sent as a header)"
    elif value != value.strip():
        problem = "must not start or end with a space (it is sent as a header)"
    else:
        return []
    return [FieldViolation(field, problem)]


def _offset(token: str, total: int) -> int:
    if not token:
        return 0
    # ASCII digits only ("²".isdigit() is true, int("²") fails), and short enough for int().
    valid = token.isascii() and token.isdigit() and len(token) <= len(str(total))
    if not valid or int(token) > total:
        raise_violations([FieldViolation("page_token", "not a token this server issued")])
    return int(token)
