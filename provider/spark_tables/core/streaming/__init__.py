"""What compiled plans and streaming aggregations share: their sinks, and FLIP-365's buffered output's options."""
