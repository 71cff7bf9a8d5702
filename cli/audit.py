"""`a2a-grpc audit`: check a hash-chained audit trail (a server's or a client's), or match a
client's trail with the servers' trails of the same messages.

Exit codes (core/exit_codes.py): `verify FILE` exits OK when the chain is intact, AUDIT_BROKEN
when it is broken (a record changed, inserted or removed), USAGE when the file cannot be read,
AUDIT_TORN when it is intact but ends in a torn line (a write cut short by a crash that no
restart has fenced yet: an incomplete record, not tampering). A torn line that a fence links
across (the writer restarted and went on) is reported, one line each, and passes.

`match CLIENT SERVER [SERVER ...]` verifies every chain first (as above; USAGE also for a CLIENT
that holds no client records), then exits AUDIT_DISAGREE when the logs disagree
(`a2a_grpc.core.audit_match` says what counts), else OK (or AUDIT_TORN when a chain ends in
an unfenced torn line).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from a2a_grpc.core import exit_codes
from a2a_grpc.core.audit_chain import Verdict, chained_records, verify
from a2a_grpc.core.audit_match import match

PROGRAM = "a2a-grpc audit"
EXIT_OK = exit_codes.OK
EXIT_BROKEN = exit_codes.AUDIT_BROKEN
EXIT_UNREADABLE = exit_codes.USAGE
EXIT_TORN = exit_codes.AUDIT_TORN
EXIT_DISAGREE = exit_codes.AUDIT_DISAGREE


class _Stop(Exception):
    """Ends the command with `code` after one line on stderr."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Check audit trails (--audit-log of `a2a-grpc serve` and of the client).",
        epilog=exit_codes.help_text(("audit",)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("verify", help="check an audit log's hash chain")
    check.add_argument("file", help="the audit log (JSON Lines) to check")
    pair = commands.add_parser(
        "match",
        help="match a client's audit log with the servers' logs by message id and hash",
    )
    pair.add_argument("client", metavar="CLIENT", help="the client's --audit-log")
    pair.add_argument("servers", metavar="SERVER", nargs="+", help="the servers' --audit-log")
    pair.add_argument(
        "--target", help="only the client's calls to this target (as its records name it)"
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error (2)
        return int(exit_.code or 0)
    try:
        return _verify(args.file) if args.command == "verify" else _match(args)
    except _Stop as stop:
        print(f"{PROGRAM}: {stop}", file=sys.stderr)
        return stop.code


def _verify(file: str) -> int:
    try:
        verdict = verify(Path(file))
    except OSError as exc:
        raise _Stop(EXIT_UNREADABLE, f"cannot read {file}: {exc.strerror}") from exc
    except ValueError as exc:
        raise _Stop(EXIT_BROKEN, f"{file}: {exc}") from exc
    print(f"{file}: {verdict.records} records, chain intact, head {verdict.head}")
    return EXIT_TORN if _torn(file, verdict) else EXIT_OK


def _match(args: argparse.Namespace) -> int:
    torn = False

    def records(file: str) -> list[tuple[int, dict[str, Any]]]:
        nonlocal torn
        try:
            verdict, kept = chained_records(Path(file))
        except OSError as exc:
            raise _Stop(EXIT_UNREADABLE, f"cannot read {file}: {exc.strerror}") from exc
        except ValueError as exc:
            raise _Stop(EXIT_BROKEN, f"{file}: {exc}") from exc
        torn = _torn(file, verdict) or torn
        return kept

    client = records(args.client)
    if client and not any(record.get("kind") == "call" for _, record in client):
        raise _Stop(
            EXIT_UNREADABLE,
            f"{args.client} holds no client call records: pass the client's log first, then "
            "the servers'",
        )
    server = [record for file in args.servers for record in records(file)]
    result = match(client, server, target=args.target)
    for finding in result.findings:
        label = "note" if not finding.disagrees else "DISAGREE"
        print(
            f"{label} message {finding.message_id} (client line {finding.client_line}): "
            f"{finding.text}"
        )
    disagreements = len(result.disagreements)
    print(
        f"{result.sent} client messages, {result.seen} seen by the server, "
        f"{disagreements} disagreement(s)"
    )
    if disagreements:
        return EXIT_DISAGREE
    return EXIT_TORN if torn else EXIT_OK


def _torn(file: str, verdict: Verdict) -> bool:
    """Reports the chain's torn lines; True when one is not fenced (the trail is still torn)."""
    for number in verdict.fenced:
        print(
            f"{file}: line {number}: a write cut short by a crash, fenced when the writer "
            "restarted (that one record is incomplete; the chain goes on intact)"
        )
    open_ = [number for number in verdict.torn if number not in verdict.fenced]
    if open_:
        numbers = ", ".join(str(number) for number in open_)
        print(
            f"{PROGRAM}: {file}: torn line(s) {numbers}: writes cut short by a crash "
            "(those records are incomplete; this is not tampering)",
            file=sys.stderr,
        )
    return bool(open_)
