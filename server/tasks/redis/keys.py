"""The Redis store's key and channel names (`Keys`), built once per scope; nothing else.

Keys (`a2a` is the default prefix). Every key of one task shares the hash tag `{<task id>}` and
each scope's ListTasks indexes share their tenant's tag, so the same code runs on a Redis
Cluster; the scripts (scripts.py) each touch one slot, but BATCH, which runs a task's write
with its index and room updates as one command where no Cluster splits them
(`RedisBackend.batch`).

    a2a:{<task>}:task        hash: the Task (protobuf), its version, scope, state, runner
    a2a:{<task>}:events      stream: every event of the task, trimmed to `stream_length` + 1
    a2a:{<task>}:push / :pushv / :pushc / :pushp
                             push configs, their version, webhook cursors, their protocols
    a2a:{t:<tenant>}:o:<owner>:all | :s:<state> | :c:<context>
                             ListTasks indexes: members "<updated ns, 20 digits>|<task id>"
    a2a:{room}:all           every stored task id; score: when it expires (+inf while live)
    a2a:{room}:o:<owner> / :t:<tenant>   live task ids per owner / tenant (the fair shares)
    a2a:{room}:parked        tasks waiting for input, by when they started waiting
    a2a:{room}:replicas      replica id -> lease expiry;  a2a:{room}:r:<replica>  its tasks
    a2a:{room}:d:<replica>   the tasks whose webhooks a replica delivers
    a2a:msg:{<digest>}       the claim on one (tenant, caller, message id): "<digest>|<task>"
    a2a:ev:<task> / a2a:cancel:<replica>   pub/sub channels: a task's events, cancels
"""

from __future__ import annotations

import json
from typing import NamedTuple

from a2a_grpc.server.tasks.base import Scope


def scope_text(scope: Scope) -> str:
    return json.dumps([scope.tenant, scope.owner])


def key_hex(text: str) -> str:
    return text.encode().hex()


def index_member(updated_ns: int, task_id: str) -> str:
    return f"{updated_ns:020d}|{task_id}"


SCOPE_NAMES_CACHED = 4096
"""Scopes whose key names `Keys.scope` keeps built (all forgotten at once past that)."""
SCOPE_NAMES_MAX_CHARS = 512
"""Tenant and owner together longer than this: the names are built for the call and not kept.
A tenant is the caller's to choose, up to a request's size; the cache holds about six times
its length, so without this bound it could pin gigabytes (at most ~12 MB with it)."""


class ScopeNames(NamedTuple):
    """What the store names after one scope (tenant, owner), built once."""

    index_prefix: str
    """The scope's ListTasks index keys up to their suffix ("all", "s:<state>", "c:<ctx>")."""
    live_owner: str
    live_tenant: str
    text: str
    """The scope as the room's scripts take it: JSON [tenant, owner]."""


class Keys:
    """Key and channel names (see the module docstring), under one prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        room = f"{prefix}:{{room}}"
        self.room_all = f"{room}:all"
        self.parked = f"{room}:parked"
        self.replicas = f"{room}:replicas"
        self._room = room
        # Every write names its scope's keys 3-5 times, each a hex encoding of the tenant and
        # the owner (tests.load.instructions --redis: 1,485,680 -> see the commit).
        self._scopes: dict[Scope, ScopeNames] = {}

    def scope(self, scope: Scope) -> ScopeNames:
        names = self._scopes.get(scope)
        if names is None:
            tenant, owner = scope
            names = ScopeNames(
                index_prefix=f"{self.prefix}:{{t:{key_hex(tenant)}}}:o:{key_hex(owner)}:",
                live_owner=f"{self._room}:o:{key_hex(owner)}",
                live_tenant=f"{self._room}:t:{key_hex(tenant)}",
                text=scope_text(scope),
            )
            if len(tenant) + len(owner) <= SCOPE_NAMES_MAX_CHARS:
                if len(self._scopes) >= SCOPE_NAMES_CACHED:
                    self._scopes.clear()
                self._scopes[scope] = names
        return names

    def task(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:task"

    def events(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:events"

    def push(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:push"

    def push_version(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:pushv"

    def push_cursors(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:pushc"

    def push_protocols(self, task_id: str) -> str:
        return f"{self.prefix}:{{{task_id}}}:pushp"

    def of_task(self, task_id: str) -> list[str]:
        """Every key of one task, in the order WRITE and FORGET take them."""
        return [
            self.task(task_id),
            self.events(task_id),
            self.push(task_id),
            self.push_version(task_id),
            self.push_cursors(task_id),
            self.push_protocols(task_id),
        ]

    def replica_deliveries(self, replica: str) -> str:
        return f"{self._room}:d:{replica}"

    def channel(self, task_id: str) -> str:
        return f"{self.prefix}:ev:{task_id}"

    def cancel_channel(self, replica: str) -> str:
        return f"{self.prefix}:cancel:{replica}"

    def replica_tasks(self, replica: str) -> str:
        return f"{self._room}:r:{replica}"

    def index(self, scope: Scope, suffix: str) -> str:
        return self.scope(scope).index_prefix + suffix

    def indexes(self, scope: Scope, state: int, context_id: str) -> list[str]:
        """A task's ListTasks index keys: all of the scope's, its state's, its context's."""
        index = self.scope(scope).index_prefix
        names = [index + "all", f"{index}s:{state}"]
        if context_id:
            names.append(f"{index}c:{key_hex(context_id)}")
        return names

    def claim(self, digest: str) -> str:
        return f"{self.prefix}:msg:{{{digest}}}"
