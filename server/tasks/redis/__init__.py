"""The Redis task store, shared by replicas: the store (store), its Lua (scripts), the client
and its cluster switch (client), one pub/sub reader per replica (events), push configs (push)
and the shared idempotency claim (dedup)."""
