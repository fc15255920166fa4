"""The Airflow side of cached tables: the registry in the run's XComs, the storage of copies, a task's uses."""
