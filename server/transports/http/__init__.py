"""The HTTP transport: the JSON-RPC and HTTP+JSON bindings over the one request handler
(bindings), which RPC each of their methods and routes calls and how its request is read
(routes), and the aiohttp server on the HTTP port that serves them with the agent card, the
probes and /metrics (server)."""
