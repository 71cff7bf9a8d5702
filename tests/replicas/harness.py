"""Server processes for replica tests: `a2a-grpc serve --store <url>` (Redis or PostgreSQL) with
the replica test agent, each on its own port; started and stopped (SIGTERM) or killed (SIGKILL)
by the test. The agent is steered through a Redis (tests/replicas/agent.py) whichever the
store."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from a2a_grpc.generated import a2a_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
AGENT = "tests.replicas.agent:ReplicaAgent"
SERVING = re.compile(r"serving A2A .* on [\d.]+:(\d+)")


@dataclass
class Replica:
    process: asyncio.subprocess.Process
    port: int
    output: list[str] = field(default_factory=list)
    channel: grpc.aio.Channel | None = None
    reader: asyncio.Task[None] | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def stub(self) -> a2a_pb2_grpc.A2AServiceStub:
        if self.channel is None:
            self.channel = grpc.aio.insecure_channel(self.target)
        return a2a_pb2_grpc.A2AServiceStub(self.channel)  # type: ignore[no-untyped-call]

    async def stop(self) -> int:
        """SIGTERM: a graceful stop; returns the exit code."""
        await self._close_channel()
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), 30)

    async def kill(self) -> None:
        """SIGKILL: the replica dies without a word."""
        await self._close_channel()
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()

    async def _close_channel(self) -> None:
        if self.channel is not None:
            await self.channel.close()
            self.channel = None


async def start_replica(redis_url: str, *options: str, store: str | None = None) -> Replica:
    """Starts a replica on a free port and returns once it serves (its startup line); its
    agent is steered through the Redis at `redis_url`, its tasks are in `store` (default: that
    Redis)."""
    env = dict(os.environ, A2A_TEST_REDIS=redis_url, PYTHONPATH=str(ROOT))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "a2a_grpc.cli.main",
        "serve",
        "--drain-delay",  # the test's own options may set it again: the last one counts
        "0",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--http-port",
        "0",
        "--store",
        store or redis_url,
        "--agent",
        AGENT,
        "--allow-private-webhooks",
        *options,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        cwd=ROOT,
    )
    assert process.stdout is not None
    output: list[str] = []
    async with asyncio.timeout(30):
        while True:
            line = (await process.stdout.readline()).decode()
            if not line:
                raise RuntimeError("the replica exited:\n" + "".join(output))
            output.append(line)
            found = SERVING.search(line)
            if found:
                break
    replica = Replica(process, int(found.group(1)), output)
    replica.reader = asyncio.get_running_loop().create_task(_drain(process, output))
    return replica


async def _drain(process: asyncio.subprocess.Process, output: list[str]) -> None:
    assert process.stdout is not None
    while line := await process.stdout.readline():
        output.append(line.decode())
