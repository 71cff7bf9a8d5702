"""The protocol: the A2A rules every binding shares. The call gate (with each call's span and
the tally of request members a JSON binding ignored), the request handler (the 11 RPCs in the
spec's validation order), one run of an agent, the idempotency window, request validation,
budget arithmetic, what a task's outcome tells metrics, and the log context of a call. It
imports no grpc, no aiohttp, no transport and nothing of ops: transports translate its core
errors, and ops reads it."""
