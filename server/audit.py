"""The audit trail: one record per request and per task outcome, in a hash-chained JSON Lines file.

Record fields: `time` (RFC 3339 UTC), `kind` ("request" or "outcome"), `method`, `message_id`,
`message_sha256` (SHA-256 of the message's canonical bytes, see `a2a_grpc.core.canonical`),
`principal`, `tenant`, `task_id`, `outcome` (a gRPC status code name for requests, a task state
for outcomes), `cost` (budget extension) and `prev`: the SHA-256 (hex) of the previous line's
bytes, or 64 zeros for the first line. Each line is the JCS form of its record.

Changing, inserting or deleting any line breaks the chain at the next line, which
`a2a-grpc audit verify FILE` reports. The last line has no successor: anchor the head hash the
verifier prints somewhere else to protect it too. The chain continues across restarts.

Writing never blocks the event loop: records go into a queue and a writer thread hashes the
message, serializes, chains and appends them, flushing once per batch.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import logging
import queue
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from a2a_grpc.core.canonical import canonical_message_bytes, canonicalize
from a2a_grpc.generated import a2a_pb2

log = logging.getLogger(__name__)

GENESIS = "0" * 64


class AuditLog:
    """Appends audit records to `path` from a background thread. Call `close` to flush."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._prev = _last_hash(self.path)
        self._file = self.path.open("ab")
        self._queue: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
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
        """Records one handled RPC. Cheap: the message is hashed on the writer thread."""
        self._queue.put(
            {
                "time": _now(),
                "kind": "request",
                "method": method,
                "principal": principal,
                "tenant": tenant,
                "task_id": task_id,
                "outcome": outcome,
                "message_id": message.message_id if message is not None else "",
                "_message": message.SerializeToString() if message is not None else None,
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
        self._queue.put(
            {
                "time": _now(),
                "kind": "outcome",
                "method": "",
                "principal": principal,
                "tenant": tenant,
                "task_id": task_id,
                "outcome": state,
                "message_id": message_id,
                "cost": cost,
            }
        )

    def close(self) -> None:
        """Writes everything queued so far, then stops the writer."""
        self._queue.put(None)
        self._writer.join()
        self._file.close()

    def _write_forever(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = None in batch
            for record in batch:
                if record is not None:
                    self._append(record)
            try:
                self._file.flush()
            except OSError:
                log.exception("cannot flush the audit log %s", self.path)
            if stop:
                return

    def _append(self, record: dict[str, Any]) -> None:
        raw = record.pop("_message", None)
        if record["kind"] == "request":
            record["message_sha256"] = (
                hashlib.sha256(canonical_message_bytes(a2a_pb2.Message.FromString(raw))).hexdigest()
                if raw is not None
                else ""
            )
        record.setdefault("cost", None)
        record["prev"] = self._prev
        line = canonicalize(record)
        try:
            self._file.write(line + b"\n")
        except OSError:
            log.exception("cannot write the audit log %s", self.path)
            return
        self._prev = hashlib.sha256(line).hexdigest()


def _now() -> str:
    now = datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


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
