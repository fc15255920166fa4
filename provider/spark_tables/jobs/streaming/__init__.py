"""The streaming engine compiled plans and streaming aggregations share: the changelog, the clock, state TTL, sources,
sinks and their queries, FLIP-365's buffers, and what a query's progress says."""
