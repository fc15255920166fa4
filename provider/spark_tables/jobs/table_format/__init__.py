"""What the capabilities ask of a table, answered by its format: one module per format (``file_tables``: Spark's own
Hive-format folders of files, with ``location_claims``; ``delta``: Delta Lake), ``tables`` for what each answers,
``choice`` for which answers a table; ``catalog`` for the catalog operations they share."""
