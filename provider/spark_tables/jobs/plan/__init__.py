"""Compiled plans inside a job: compiling Spark SQL into a plan, the stateful operators with per-input TTL, sinks."""
