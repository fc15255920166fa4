"""The CTAS jobs: the lifecycle of a created table, and the catalog operations it builds on."""
