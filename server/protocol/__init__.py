"""The protocol: the A2A rules every binding shares. The request handler (the 11 RPCs in the
spec's validation order), one run of an agent, the idempotency window, request validation,
budget arithmetic, what a task's outcome tells metrics, and the log context of a call. It
imports no grpc, no aiohttp and no transport: transports translate its core errors."""
