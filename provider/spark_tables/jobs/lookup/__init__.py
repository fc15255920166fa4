"""Lookup joins inside a job: sources, the partial cache of each executor worker, full-cache reloads, metrics."""
