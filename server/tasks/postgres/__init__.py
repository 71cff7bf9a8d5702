"""The PostgreSQL task store, shared by replicas, split by concern; each part takes the backend.

- backend: connections, round trips bounded in time, health; batch: concurrent writes
  committed together (group commit);
- schema: the tables, their migrations and the version table;
- store: the `TaskStore` contract's writes, and the facade over the parts below;
- writes: the write statements; reads: one task, ListTasks pages, replay;
- room: room, fair shares and pruning; events: the LISTEN connection, remote outcomes;
- push: push configs and webhook delivery; leases: leases and reaping; claims: message-id
  claims (for the idempotency window shared by replicas, `protocol.dedup.SharedDedupWindow`).

Imports point one way: the parts import the backend (and one another's results: reads, events),
the store imports the parts, and no part imports the store. Needs the `postgresql` extra
(psycopg); `compose.py` builds the store with its listener and webhook dispatcher
(`PostgresTaskStore.connect`).
"""
