"""Task stores: the contract (base), this process's memory (memory, table, index)."""
