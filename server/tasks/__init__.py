"""Task stores: the contract (base); this process's memory (memory, table, index); Redis shared
by replicas (redis_store and its redis_* modules)."""
