"""Transports: the wire. gRPC (`grpc/`: the 1.0 servicer and A2A 0.3's) and HTTP (`http/`:
JSON-RPC, HTTP+JSON, the agent card, probes and /metrics) decode requests, call the protocol
and encode answers and errors. Where they listen is `server/addresses.py`'s."""
