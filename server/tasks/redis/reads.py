"""Reading tasks from Redis: one task's record as its writers need it (`load`), one task as a
caller sees it (`read_into`), and ListTasks pages (`list_page`). Reads only: a stale index
member found on the way (its task expired, or was re-indexed under a newer member) is swept.

ListTasks walks the scope's index (a sorted set of "<updated ns>|<task id>" members, most
recently updated first) by lexical range, and reads each member's task in one pipeline; the
task's hash names its current member (`ik`), which tells a stale member from a live one. Page
tokens are the last member's (updated, id), valid on every replica.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.tasks.base import Scope, TaskQuery
from a2a_grpc.server.tasks.index import decode_page_token, encode_page_token, trim_history
from a2a_grpc.server.tasks.redis.backend import RedisBackend
from a2a_grpc.server.tasks.redis.keys import index_member, key_hex


@dataclass(slots=True)
class Loaded:
    task: a2a_pb2.Task
    scope: Scope
    version: int
    runner: str
    member: str


async def load(backend: RedisBackend, task_id: str) -> Loaded | None:
    fields = await backend.call(
        backend.client.hmget(
            backend.keys.task(task_id), ["body", "tenant", "owner", "ver", "runner", "ik"]
        )
    )
    body, tenant, owner, version, runner, ik = fields
    if body is None:
        return None
    task = a2a_pb2.Task.FromString(body)
    return Loaded(
        task,
        Scope(tenant.decode(), owner.decode()),
        int(version),
        (runner or b"").decode(),
        (ik or b"").decode(),
    )


async def read_into(
    backend: RedisBackend,
    task_id: str,
    scope: Scope,
    target: a2a_pb2.Task,
    history_length: int | None,
) -> bool:
    body, tenant, owner = await backend.call(
        backend.client.hmget(backend.keys.task(task_id), ["body", "tenant", "owner"])
    )
    if body is None or Scope(tenant.decode(), owner.decode()) != scope:
        return False
    target.ParseFromString(body)
    trim_history(target, history_length)
    return True


async def list_page(
    backend: RedisBackend, scope: Scope, query: TaskQuery
) -> a2a_pb2.ListTasksResponse:
    response = a2a_pb2.ListTasksResponse(page_size=query.page_size)
    keys = backend.keys
    client = backend.client
    predicate_state = 0
    if query.context_id:
        key = keys.index(scope, f"c:{key_hex(query.context_id)}")
        predicate_state = query.state
    elif query.state:
        key = keys.index(scope, f"s:{query.state}")
    else:
        key = keys.index(scope, "all")
    floor = f"[{query.updated_after_ns:020d}|" if query.updated_after_ns else "-"
    ceiling = "+"
    if query.page_token:
        updated, last_id = decode_page_token(query.page_token)
        ceiling = f"({index_member(updated, last_id)}"
    page: list[tuple[str, a2a_pb2.Task]] = []
    stale: list[str] = []
    exhausted = False
    batch = max(16, query.page_size + 1)
    while len(page) <= query.page_size and not exhausted:
        members = await backend.call(
            client.zrange(key, ceiling, floor, desc=True, bylex=True, offset=0, num=batch)
        )
        exhausted = len(members) < batch
        if not members:
            break
        decoded = [name.decode() for name in members]
        ceiling = f"({decoded[-1]}"
        async with client.pipeline(transaction=False) as pipe:
            for name in decoded:
                pipe.hmget(keys.task(name.partition("|")[2]), ["body", "ik"])
            rows = await backend.call(pipe.execute())
        for name, (body, current) in zip(decoded, rows, strict=True):
            if body is None or (current or b"").decode() != name:
                stale.append(name)  # expired, or re-indexed under a newer member
                continue
            task = a2a_pb2.Task.FromString(body)
            if predicate_state and task.status.state != predicate_state:
                continue
            page.append((name, task))
            if len(page) > query.page_size:
                break
    if len(page) > query.page_size:
        page.pop()
        last_member = page[-1][0]
        updated_text, _, last_id = last_member.partition("|")
        response.next_page_token = encode_page_token((int(updated_text), last_id))
    for _, task in page:
        if not query.include_artifacts:
            del task.artifacts[:]
        trim_history(task, query.history_length)
        response.tasks.append(task)
    if stale:
        await backend.call(client.zrem(key, *stale))
    response.total_size = await _count(backend, key, floor, predicate_state, len(page))
    return response


async def _count(backend: RedisBackend, key: str, floor: str, state: int, at_least: int) -> int:
    """Tasks matching a ListTasks filter (stale members not yet swept may count too)."""
    client = backend.client
    if not state:
        return int(await backend.call(client.zlexcount(key, floor, "+")))
    # context and state together: walk the context's index (it has no state index)
    members = await backend.call(client.zrange(key, floor, "+", bylex=True))
    async with client.pipeline(transaction=False) as pipe:
        for name in members:
            pipe.hget(backend.keys.task(name.decode().partition("|")[2]), "state")
        states = await backend.call(pipe.execute())
    return max(at_least, sum(1 for value in states if value is not None and int(value) == state))
