"""A TCP proxy in front of a real server that can cut every open connection at once.

It stands for the network between a client and the agent: `cut()` aborts both sides of every
connection it carries (a reset, as a dropped link or a restarted load balancer gives), while new
connections keep being accepted and forwarded.

Given more than one upstream (`also`), it balances as an L4 load balancer does: each new
connection goes to the next upstream in turn. With `drop_first_reply`, the first connection's
first reply never reaches the client: when the server starts to answer a call (the first byte
of an HTTP/1.1 response, or the first HTTP/2 DATA frame of a stream, or its trailers-only
HEADERS), both sides are reset instead, as a proxy or link that fails just then would do. By
then the server has done the call's work (a unary call answers once it is done); the client
sees its connection reset and, retrying, reaches the next upstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

_HTTP2_FRAME_HEADER = 9
_HTTP2_DATA = 0x0
_HTTP2_HEADERS = 0x1
_END_STREAM = 0x1


class TcpProxy:
    def __init__(
        self,
        upstream_port: int,
        host: str = "127.0.0.1",
        *,
        also: Sequence[int] = (),
        drop_first_reply: bool = False,
    ) -> None:
        self.host = host
        self.upstream_port = upstream_port
        """The first upstream (the only one without `also`; may be changed between
        connections)."""
        self._also = tuple(also)
        self.drop_first_reply = drop_first_reply
        self.dropped = asyncio.Event()
        """Set once the first reply was dropped."""
        self.connections = 0
        """Connections accepted so far."""
        self.routed: list[int] = []
        """The upstream port of each connection, in order."""
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
        number = self.connections
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        ports = (self.upstream_port, *self._also)
        port = ports[number % len(ports)]
        self.routed.append(port)
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, port)
        except OSError:
            writer.transport.abort()
            self._tasks.discard(task)
            return
        pair = (writer, up_writer)
        self._open.append(pair)
        replies = (
            self._drop_reply(up_reader, writer, up_writer)
            if self.drop_first_reply and number == 0
            else _pipe(up_reader, writer)
        )
        try:
            await asyncio.gather(_pipe(reader, up_writer), replies, return_exceptions=True)
        finally:
            if pair in self._open:
                self._open.remove(pair)
            writer.transport.abort()
            up_writer.transport.abort()
            self._tasks.discard(task)

    async def _drop_reply(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: asyncio.StreamWriter,
    ) -> None:
        """Forwards the server's bytes up to its first reply, then resets both sides."""
        buffer = b""
        while data := await reader.read(65536):
            buffer += data
            if buffer.startswith(b"HTTP/"):  # HTTP/1.1: any byte of a response is the reply
                break
            forward, reply = _http2_until_reply(buffer)
            writer.write(buffer[:forward])
            await writer.drain()
            buffer = buffer[forward:]
            if reply:
                break
        else:
            return
        writer.transport.abort()
        upstream.transport.abort()
        self.dropped.set()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        if not writer.transport.is_closing():
            writer.close()


def _http2_until_reply(buffer: bytes) -> tuple[int, bool]:
    """How many bytes of `buffer` are whole HTTP/2 frames (the client preface answer, SETTINGS,
    WINDOW_UPDATE, PING, initial HEADERS) before a stream's reply, and whether one follows."""
    offset = 0
    while len(buffer) - offset >= _HTTP2_FRAME_HEADER:
        length = int.from_bytes(buffer[offset : offset + 3], "big")
        kind, flags = buffer[offset + 3], buffer[offset + 4]
        stream = int.from_bytes(buffer[offset + 5 : offset + 9], "big") & 0x7FFFFFFF
        if stream and (kind == _HTTP2_DATA or (kind == _HTTP2_HEADERS and flags & _END_STREAM)):
            return offset, True
        if len(buffer) - offset < _HTTP2_FRAME_HEADER + length:
            break
        offset += _HTTP2_FRAME_HEADER + length
    return offset, False
