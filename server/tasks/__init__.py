"""Task stores: the contract (base); this process's memory (memory, table, index); Redis shared
by replicas (redis/); and the stream fan-out both use (broker)."""
