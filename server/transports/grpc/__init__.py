"""The gRPC transport: `lf.a2a.v1.A2AService` (servicer) and A2A 0.3's `a2a.v1.A2AService`
(servicer_v03) over the one request handler."""
