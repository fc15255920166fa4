"""The Airflow side of lookup joins that owns no connection: when a full cache's snapshot reloads."""
