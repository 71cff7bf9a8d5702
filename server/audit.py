"""The audit trail: one record per request and per task outcome, in a hash-chained JSON Lines file.

Record fields: `time` (RFC 3339 UTC), `kind` ("request" or "outcome"), `method`, `message_id`,
`message_sha256` (SHA-256 of the message's canonical bytes, see `a2a_grpc.core.canonical`),
`principal`, `tenant`, `task_id`, `outcome` (a gRPC status code name for requests, a task state
for outcomes), `cost` (budget extension) and `prev`: the SHA-256 (hex) of the previous line's
bytes, or 64 zeros for the first line. Each line is the JCS (RFC 8785) form of its record.

Changing, inserting or deleting any line breaks the chain at the next line, which
`a2a-grpc audit verify FILE` reports. The last line has no successor: anchor the head hash the
verifier prints somewhere else to protect it too. The chain continues across restarts.

Writing never blocks the event loop on I/O: records are batched, and once per event-loop turn the
batch is hashed, chained and serialized (a few microseconds each, on the loop, so no thread
fights the loop for the GIL) and handed to a writer thread that appends and flushes the bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import queue
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from a2a_grpc.core.canonical import canonical_message_bytes
from a2a_grpc.generated import a2a_pb2

log = logging.getLogger(__name__)

GENESIS = "0" * 64
WRITE_INTERVAL = 0.05
"""Seconds the writer gathers records before one write and flush."""


class AuditLog:
    """Appends audit records to `path`. Call `close` to write everything and stop."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._prev = _last_hash(self.path)
        self._file = self.path.open("ab")
        self._pending: list[dict[str, Any]] = []
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write_forever, name="a2a-audit", daemon=True)
        self._writer.start()

    def request(
        self,
        *,
        method: str,
        principal: str,
        tenant: str,
        outcome: str,
        task_id: str = "",
        message: a2a_pb2.Message | None = None,
    ) -> None:
        """Records one handled RPC."""
        self._add(
            {
                "time": _now(),
                "kind": "request",
                "method": method,
                "principal": principal,
                "tenant": tenant,
                "task_id": task_id,
                "outcome": outcome,
                "message_id": message.message_id if message is not None else "",
                "message_sha256": (
                    hashlib.sha256(canonical_message_bytes(message)).hexdigest()
                    if message is not None
                    else ""
                ),
                "cost": None,
            }
        )

    def outcome(
        self,
        *,
        task_id: str,
        state: str,
        principal: str,
        tenant: str,
        message_id: str,
        cost: dict[str, str] | None,
    ) -> None:
        """Records how a task's run ended (a terminal or interrupted state, or a direct reply)."""
        self._add(
            {
                "time": _now(),
                "kind": "outcome",
                "method": "",
                "principal": principal,
                "tenant": tenant,
                "task_id": task_id,
                "outcome": state,
                "message_id": message_id,
                "message_sha256": "",
                "cost": cost,
            }
        )

    def close(self) -> None:
        """Writes everything recorded so far, then stops the writer."""
        self._drain()
        self._queue.put(None)
        self._writer.join()
        self._file.close()

    def _add(self, record: dict[str, Any]) -> None:
        self._pending.append(record)
        if len(self._pending) > 1:
            return  # a drain is already scheduled
        try:
            asyncio.get_running_loop().call_soon(self._drain)
        except RuntimeError:  # no event loop (a tool or a test): write at once
            self._drain()

    def _drain(self) -> None:
        if not self._pending:
            return
        lines = []
        for record in self._pending:
            record["prev"] = self._prev
            line = _canonical_line(record)
            self._prev = hashlib.sha256(line).hexdigest()
            lines.append(line)
        self._pending.clear()
        self._queue.put(b"\n".join(lines) + b"\n")

    def _write_forever(self) -> None:
        while True:
            chunks = [self._queue.get()]
            # Waking up for every event-loop turn would make this thread contend with the loop
            # for the GIL; gathering for a moment first keeps it to a few writes a second.
            time.sleep(WRITE_INTERVAL)
            while True:
                try:
                    chunks.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            data = b"".join(chunk for chunk in chunks if chunk is not None)
            try:
                self._file.write(data)
                self._file.flush()
            except OSError:
                log.exception("cannot write the audit log %s", self.path)
            if None in chunks:
                return


def _canonical_line(record: dict[str, Any]) -> bytes:
    # Records hold only ASCII keys, strings, null and objects of strings, for which sorted
    # compact json.dumps is byte-identical to JCS (RFC 8785), at a third of the cost.
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


_second: tuple[int, str] = (-1, "")


def _now() -> str:
    """RFC 3339 UTC with milliseconds; the date-time part is formatted once per second."""
    global _second
    now = time.time()
    whole = int(now)
    if _second[0] != whole:
        _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{_second[1]}.{int((now - whole) * 1000):03d}Z"


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with path.open("rb") as file:
        for number, line in enumerate(file, start=1):
            yield number, line.rstrip(b"\n")


def _last_hash(path: Path) -> str:
    if not path.exists():
        return GENESIS
    last = None
    for _, line in _lines(path):
        if line:
            last = line
    return GENESIS if last is None else hashlib.sha256(last).hexdigest()


def verify(path: Path) -> tuple[int, str]:
    """(records, head hash) of an intact chain; ValueError naming the first broken line."""
    prev = GENESIS
    count = 0
    for number, line in _lines(path):
        try:
            record = json.loads(line)
        except ValueError:
            raise ValueError(f"line {number} is not a JSON record") from None
        if not isinstance(record, dict) or record.get("prev") != prev:
            raise ValueError(
                f"line {number} does not follow line {number - 1}: the chain is broken "
                "(a record was changed, inserted or removed)"
            )
        prev = hashlib.sha256(line).hexdigest()
        count += 1
    return count, prev


def main(argv: list[str]) -> int:
    """`a2a-grpc audit verify FILE`: exit 0 when the chain is intact, 1 when it is broken."""
    parser = argparse.ArgumentParser(prog="a2a-grpc audit")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("verify", help="check an audit log's hash chain")
    check.add_argument("file")
    args = parser.parse_args(argv)
    try:
        count, head = verify(Path(args.file))
    except OSError as exc:
        print(f"a2a-grpc audit: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"a2a-grpc audit: {args.file}: {exc}", file=sys.stderr)
        return 1
    print(f"{args.file}: {count} records, chain intact, head {head}")
    return 0
