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

`ResponseCutter` is the same proxy for gRPC, reading the server's HTTP/2 frames: it can end the
next response the server begins after its headers, before its first message, as an upstream
that fails mid-call does (see the class).
"""

from __future__ import annotations

import asyncio
import enum
import struct
from collections.abc import Sequence

_HTTP2_FRAME_HEADER = 9
_HTTP2_DATA = 0x0
_HTTP2_HEADERS = 0x1
_HTTP2_GOAWAY = 0x7
_END_STREAM = 0x1
_INTERNAL_ERROR = 0x2


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
            else self._downstream(up_reader, writer, up_writer)
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

    async def _downstream(
        self,
        up_reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        """Forwards what the server sends to the client."""
        await _pipe(up_reader, writer)


class Ending(enum.Enum):
    """How `ResponseCutter` ends a response it cuts."""

    GOAWAY = "goaway"
    """GOAWAY with INTERNAL_ERROR (2) naming no stream as processed, then the connection
    closes: a server that fails under its open calls."""
    END_STREAM = "end_stream"
    """An empty DATA frame with END_STREAM and no trailers: a stream that ends with no gRPC
    status. Nothing more from the server passes on that connection, which closes once the
    client closes it (as nginx does after its call: it keeps no upstream connection open),
    so that the client reads the stream's end, not a lost connection."""


_FRAME_HEADER = struct.Struct(">I B I")
"""An HTTP/2 frame header (RFC 9113 §4.1), read as the 24-bit length and type in one word,
the flags, and the stream id."""


class ResponseCutter(TcpProxy):
    """A `TcpProxy` for gRPC over h2c that reads the HTTP/2 frames the server sends.

    `cut_next_response(ending)` arms it once: the next response the server begins, on any
    connection, passes its headers (the server took the call: for a streaming send, it has
    taken the message and started the task) and is then ended, before its first message, as
    `ending` says. That connection closes; the others and the later ones are forwarded as
    they are. `cuts` counts the responses cut.

    In front of nginx (`grpc_pass` to this proxy) it plays the failing upstream: nginx then
    resets the client's stream, and the client sees what a proxy passes on.
    """

    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        super().__init__(upstream_port, host)
        self._ending: Ending | None = None
        self.cuts = 0

    def cut_next_response(self, ending: Ending) -> None:
        self._ending = ending

    async def _downstream(
        self,
        up_reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        started: set[int] = set()  # streams whose response headers passed while armed
        try:
            while True:
                header = await up_reader.readexactly(_FRAME_HEADER.size)
                length_type, _flags, stream_id = _FRAME_HEADER.unpack(header)
                length, frame_type = length_type >> 8, length_type & 0xFF
                payload = await up_reader.readexactly(length)
                stream_id &= 0x7FFFFFFF
                ending = self._ending
                if ending is not None and stream_id:
                    if frame_type == _HTTP2_HEADERS:
                        started.add(stream_id)
                    elif frame_type == _HTTP2_DATA and stream_id in started:
                        self._ending = None
                        self.cuts += 1
                        writer.write(_ended(ending, stream_id))
                        await writer.drain()
                        if ending is Ending.END_STREAM:
                            await _drained(up_reader)
                        return  # and the connection closes (below)
                writer.write(header + payload)
                await writer.drain()
        except asyncio.IncompleteReadError:
            return
        finally:
            up_writer.transport.abort()
            if not writer.transport.is_closing():
                writer.close()


def _ended(ending: Ending, stream_id: int) -> bytes:
    """The frame that ends stream `stream_id` as `ending` says."""
    if ending is Ending.GOAWAY:
        payload = struct.pack(">II", 0, _INTERNAL_ERROR)  # last stream id 0: none processed
        return _frame(_HTTP2_GOAWAY, 0, 0, payload)
    return _frame(_HTTP2_DATA, _END_STREAM, stream_id, b"")


async def _drained(reader: asyncio.StreamReader) -> None:
    """Reads and drops what `reader` has until it ends."""
    while await reader.read(65536):
        pass


def _frame(frame_type: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return _FRAME_HEADER.pack(len(payload) << 8 | frame_type, flags, stream_id) + payload


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
