"""Compiled plans with per-operator state TTL (FLIP-292): the plan document, its statements, nodes and state."""
