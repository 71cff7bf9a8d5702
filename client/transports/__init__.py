"""The client's transports: one per A2A binding behind one small seam (`base.Transport`).

A transport moves one request to the agent and its answer (or events) back, and maps what its
binding says when a call fails into the shared error classes. Everything else `A2AClient` does
(retry, resumption, the reducer, credentials, tenant, extensions, signing, the audit trail) sits
above the seam and is written once.
"""
