"""The `a2a-grpc` console script: `serve` runs the server, `audit` checks and matches audit
trails, `keys` makes signing keys, `store` migrates a PostgreSQL store's schema and reseals push
configs' secrets, `console` runs the local web console, every other command is the client's."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "serve":
        from a2a_grpc.server.cli import main as serve_main

        return serve_main(args[1:])
    if args and args[0] == "audit":
        from a2a_grpc.cli.audit import main as audit_main

        return audit_main(args[1:])
    if args and args[0] == "store":
        from a2a_grpc.cli.store import main as store_main

        return store_main(args[1:])
    if args and args[0] == "keys":
        from a2a_grpc.cli.keys import main as keys_main

        return keys_main(args[1:])
    # gRPC's own C-core log lines (handshake failures, GOAWAYs) would come before the command's
    # one line that says what failed; they say nothing more. Read when grpc initializes, so set
    # before it is imported; GRPC_VERBOSITY in the environment still wins.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    if args and args[0] == "console":
        from a2a_grpc.cli.console import main as console_main

        return console_main(args[1:])
    from a2a_grpc.client.cli import main as client_main

    return client_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
