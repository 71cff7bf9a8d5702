"""Task stores, below the protocol: nothing here imports the protocol, the webhooks or the
transports (what a store needs of them is a Protocol in base).

- base: the `TaskStore` contract, the store's errors, the Protocols a store is given
  (`StoreListener`, `Webhooks`, `Claims`, `Outcome`, `PushConfigs`), and how one is opened
  (`StoreSettings`, `StoreFactory`, `StoreKind`): the supported extension point;
- registry: which store a URL's scheme names, built in or added by a package's entry point;
- contract/: the contract suite every store passes, for pytest (only tests import it);
- memory: this process's store, over table (tasks and their bounds) and index (the ListTasks
  indexes); changes: status changes and their events, shared by both stores;
- broker: the stream fan-out both use;
- redis/: the store shared by replicas, split by concern (see its docstring).

`server/compose.py` opens a store (through the registry) with its collaborators for the
handler, and closes it.
"""
