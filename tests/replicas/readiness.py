"""A readiness follower: the part Kubernetes' endpoints controller and an ingress controller play
in front of replicas, for a proxy (nginx OSS) that reads no health itself.

For each replica it is told about, it holds a gRPC Health `Watch` (service "") open, so it learns
of every change the moment the replica reports it, without polling. When the replica says
NOT_SERVING (on SIGTERM, at the start of its drain delay) it reloads nginx with that upstream
server marked `down`, waits until the reload is in effect (`NginxGrpcProxy.reload`), and then
checks, on a fresh connection, that the replica still answers: so the proxy stopped sending it
calls while it still served them, before its port closed. Each take-out is recorded as a
`Removal`; the test asserts on them. When a replica it follows says SERVING, it is put back.

A replica's NOT_SERVING is final here: in these tests it comes only from SIGTERM, and the
restarted process is a new replica the test hands over with `follow` again (as a new pod is a
new endpoint). So the follower ends its Watch once it has taken the replica out. It must: an
open Watch is an RPC that never ends, and the server's graceful stop waits for it through the
whole --shutdown-grace (10 s) before it cancels it ("Cancelling all calls").
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.nginx_proxy import NginxGrpcProxy

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
PROBE_TIMEOUT = 2.0
FRESH_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)
"""A channel option: a subchannel (connection) of the channel's own, never one shared with the
process's other channels to the same address."""


@dataclass(frozen=True)
class Removal:
    """One take-out: `port`; `seconds` from the NOT_SERVING update to nginx's reload in effect;
    `still_serving`: after that, the replica answered Health.Check (NOT_SERVING) on a new
    connection, so its port was still open; `probe` says what it answered."""

    port: int
    seconds: float
    still_serving: bool
    probe: str


class ReadinessFollower:
    """Follows the Health of the replicas behind `proxy` and keeps nginx's rotation in step.
    `follow(port)` for each replica started; `close()` at the end."""

    def __init__(self, proxy: NginxGrpcProxy) -> None:
        self.proxy = proxy
        self.removals: list[Removal] = []
        self.failures: list[str] = []
        """What went wrong in a watch (a stream that ended before NOT_SERVING, a failed
        reload); the test asserts it stays empty."""
        self._wanted: set[int] = set(proxy.down)
        self._reload = asyncio.Lock()
        self._changed = asyncio.Condition()
        self._watches: set[asyncio.Task[None]] = set()

    def follow(self, port: int) -> None:
        """Starts following the replica (just started) on 127.0.0.1:`port`."""
        watch = asyncio.ensure_future(self._watch(port))
        self._watches.add(watch)
        watch.add_done_callback(self._watches.discard)

    async def in_rotation(self, port: int) -> None:
        """Returns once nginx runs a configuration that sends `port` calls."""
        async with self._changed:
            await self._changed.wait_for(lambda: port not in self.proxy.down)

    async def close(self) -> None:
        for watch in list(self._watches):
            watch.cancel()
        await asyncio.gather(*self._watches, return_exceptions=True)

    async def _watch(self, port: int) -> None:
        target = f"127.0.0.1:{port}"
        loop = asyncio.get_running_loop()
        async with grpc.aio.insecure_channel(target, options=FRESH_CONNECTION) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                # wait_for_ready: the replica's port is bound, its first connect cannot fail.
                async for update in stub.Watch(
                    health_pb2.HealthCheckRequest(service=""), wait_for_ready=True
                ):
                    if update.status == SERVING:
                        await self._set(port, down=False)
                        continue
                    seen = loop.time()
                    await self._set(port, down=True)
                    seconds = loop.time() - seen
                    still_serving, probe = await self._probe(target)
                    self.removals.append(Removal(port, seconds, still_serving, probe))
                    return  # see the module docstring: the Watch must not outlive this
            except grpc.aio.AioRpcError as exc:
                await self._set(port, down=True)
                self.failures.append(f"{target}: Watch ended: {exc.code()}: {exc.details()}")
            except Exception as exc:  # a failed reload, say: the test must hear of it
                self.failures.append(f"{target}: {type(exc).__name__}: {exc}")
            else:
                self.failures.append(f"{target}: Watch ended without NOT_SERVING")

    async def _set(self, port: int, *, down: bool) -> None:
        """Marks `port` down (or up) and reloads nginx unless it already runs that way."""
        async with self._reload:
            if down:
                self._wanted.add(port)
            else:
                self._wanted.discard(port)
            if self._wanted != self.proxy.down:
                await asyncio.to_thread(self.proxy.reload, frozenset(self._wanted))
        async with self._changed:
            self._changed.notify_all()

    @staticmethod
    async def _probe(target: str) -> tuple[bool, str]:
        """Health.Check on a connection of its own: True if the replica still answers."""
        async with grpc.aio.insecure_channel(target, options=FRESH_CONNECTION) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                response = await stub.Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=PROBE_TIMEOUT
                )
            except grpc.aio.AioRpcError as exc:
                return False, f"{exc.code()}: {exc.details()}"
            return True, health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
