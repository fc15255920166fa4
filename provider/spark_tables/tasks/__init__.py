"""What a task does around its job on the Airflow side, owning no connection: the SQL it is given, read; its run's
cached tables (the registry in XCom, the copies on storage and in a Connect server's memory, claims); its CTAS
claims; task states; a lookup table's reload schedule."""
