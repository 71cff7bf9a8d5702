"""A TCP proxy in front of a real server that can cut every open connection at once.

It stands for the network between a client and the agent: `cut()` aborts both sides of every
connection it carries (a reset, as a dropped link or a restarted load balancer gives), while new
connections keep being accepted and forwarded.
"""

from __future__ import annotations

import asyncio


class TcpProxy:
    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.upstream_port = upstream_port
        self.connections = 0
        """Connections accepted so far."""
        self._open: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def cut(self) -> None:
        """Resets every connection open now."""
        for client, upstream in self._open:
            client.transport.abort()
            upstream.transport.abort()
        self._open.clear()

    def drop_upstream(self) -> None:
        """Ends every connection open now from the server's side, as a server that went away
        or a proxy's timeout does: the upstream connection is reset, the client's gets what was
        already sent and then an orderly close (FIN)."""
        for client, upstream in self._open:
            upstream.transport.abort()
            client.close()
        self._open.clear()

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        # Every connection was reset: each one's task ends by itself.
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.upstream_port)
        except OSError:
            writer.transport.abort()
            self._tasks.discard(task)
            return
        pair = (writer, up_writer)
        self._open.append(pair)
        try:
            await asyncio.gather(
                _pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True
            )
        finally:
            if pair in self._open:
                self._open.remove(pair)
            writer.transport.abort()
            up_writer.transport.abort()
            self._tasks.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        if not writer.transport.is_closing():
            writer.close()
