"""What the capabilities ask of a table, answered by its format: one module per format for its tables
(``file_tables``: Spark's own Hive-format folders of files, with ``location_claims``; ``delta``: Delta Lake, with
``delta_log``) and one for what streaming queries do with them (``file_streams``, ``delta_streams``, with
``batch_marks``); ``tables`` for what each answers, ``choice`` for which answers a table; ``catalog`` for the catalog
operations they share."""
