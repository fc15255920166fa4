"""Hooks: they own the connections (Spark, catalog, lookup tables) and the I/O of each capability."""
