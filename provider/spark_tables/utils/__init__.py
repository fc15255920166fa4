"""Helpers of the Airflow side that are not hooks: settings, the job package, the drivers' class-data archive,
the embedded catalog's lock, the PostgreSQL metastore schema, local Java and Spark, reload schedules."""
