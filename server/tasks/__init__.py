"""Task stores, below the protocol: nothing here imports the protocol, the webhooks or the
transports (what a store needs of them is a Protocol in base).

- base: the `TaskStore` contract, the store's errors, and the Protocols a store is given
  (`StoreListener`, `Webhooks`, `Claims`, `Outcome`);
- memory: this process's store, over table (tasks and their bounds) and index (the ListTasks
  indexes); changes: status changes and their events, shared by both stores;
- broker: the stream fan-out both use;
- redis/: the store shared by replicas, split by concern (see its docstring).

`server/compose.py` builds a store with its collaborators for the handler.
"""
