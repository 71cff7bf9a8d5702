"""The Redis task store, shared by replicas, split by concern; each part takes the backend.

- backend: the client and its cluster switch, the key names, the scripts, health;
- keys: key and channel names; scripts: the Lua; client: the coalescing Redis client;
- store: the `TaskStore` contract's writes, and the facade over the parts below;
- room: room and fair shares; eviction: tasks leaving the store;
- reads: one task, ListTasks pages;
- events: one pub/sub reader per replica, and the outcome of a remote first delivery;
- push: push configs; deliveries: webhook delivery, cursors and takeover;
- leases: replica leases and reaping; claims: message-id claims (for the idempotency window
  shared by replicas, `protocol.dedup.SharedDedupWindow`).

- urls: its URL schemes (redis://, rediss://, unix://, redis+cluster://) as `StoreKind`s, for
  the store registry (tasks/registry.py).

Imports point one way: the parts import the backend (and one another's results: reads, push,
events), the store imports the parts, and no part imports the store. The registry opens the
store by its URL (`urls.REDIS`, `RedisTaskStore.connect`) with the server's listener and
webhook dispatcher.
"""
